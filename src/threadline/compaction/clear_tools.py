"""Tool-result clearing (observation masking): the lightest compaction.

Tool output is long and mostly spent once the model has reasoned about it; the calls and the
reasoning are short and stay. Results older than the newest ``keep`` call/result pairs become a
placeholder naming their item, so ``recall`` can bring any of them back verbatim; excluded
tools' results are never cleared.
"""

from __future__ import annotations

from collections.abc import Collection

from threadline.compaction.view import ContextView
from threadline.items import ItemKind


def clearable(view: ContextView, *, keep: int, exclude: Collection[str] = ()) -> list[int]:
    """Seqs of the tool results a clearing would replace, oldest first."""
    names = {i.content["call_id"]: i.content["name"] for i in view.items
             if i.kind is ItemKind.TOOL_CALL}
    results = [i for i in view.items if i.kind is ItemKind.TOOL_RESULT]
    older = results[: max(0, len(results) - keep)]
    return [i.seq for i in older if i.seq not in view.cleared
            and names.get(i.content["call_id"]) not in exclude]
