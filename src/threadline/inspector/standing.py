"""View 2's panel of what stands now: a branch's working state and its standing constraints.

Both are a fold over the branch's items (``compaction/working_state.py``,
``compaction/constraints.py``). The items are append-only, so the fold is kept per branch and
carried forward: the first look at a branch reads its constraint and working-state items
(one scan of the branch), every later look only the items since.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from threadline.compaction.constraints import Constraint, active
from threadline.compaction.working_state import WorkingState, state_of
from threadline.inspector.deps import Inspector
from threadline.items import Item, ItemKind
from threadline.stores.browse import Lineage

_KINDS = (ItemKind.CONSTRAINT, ItemKind.CONSTRAINT_REMOVED, ItemKind.WORKING_STATE)
_REMEMBERED = 256  # branches


@dataclass(frozen=True)
class Standing:
    state: WorkingState
    constraints: tuple[Constraint, ...]


class StandingFold:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str], tuple[int, tuple[Item, ...]]] = OrderedDict()

    def of(self, inspector: Inspector, conversation_id: str, lineage: Lineage) -> Standing:
        key = (conversation_id, lineage[0][0])
        with self._lock:
            through, items = self._seen.get(key, (0, ()))
        head = inspector.store.head(conversation_id, key[1])
        new = inspector.browse.items_of_kinds(conversation_id, lineage, _KINDS, after=through)
        if new:
            # keep what the fold needs: the constraint items, and the newest working state
            items = tuple(i for i in (*items, *new) if i.kind is not ItemKind.WORKING_STATE) \
                + tuple(i for i in (*items, *new) if i.kind is ItemKind.WORKING_STATE)[-1:]
            items = tuple(sorted(items, key=lambda i: i.seq))
        through = max([through, 0 if head is None else head.seq, *(i.seq for i in new)])
        with self._lock:
            self._seen[key] = (through, items)
            self._seen.move_to_end(key)
            while len(self._seen) > _REMEMBERED:
                self._seen.popitem(last=False)
        return Standing(state_of(items), tuple(active(items)))
