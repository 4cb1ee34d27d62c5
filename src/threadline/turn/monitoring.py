"""What a safety monitor's decisions look like in the log, for everything that reads them.

A trajectory monitor (``providers/monitor/``) records one decision per turn as the ``monitor``
field of its context item: the conversation's risk after the turn's message, the signals it
was judged on, the actions the risk maps to, and the state it carries to the next turn
(``restricted``: tools limited to a safe set for the rest of the conversation); and a second
one after the reply where the reply raised the risk (``after_reply``). The tool
guard, the inspector and the metrics read decisions through this module, so none of them
depends on the monitor itself; a decision is data in the log like any other item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadline.items import Item, ItemKind

FIELD = "monitor"  # the context item's field that holds a decision
# what a decision can ask for, mildest first; the metrics' labels are these and nothing else
ACTIONS = ("note", "remind", "restrict", "flag", "refuse")
ALLOW = "allow"  # the action label of a decision that asked for nothing


def decision(item: Item) -> Mapping[str, Any] | None:
    """The monitor decision ``item`` records, if it is one."""
    if item.kind is not ItemKind.CONTEXT:
        return None
    found = item.content.get(FIELD)
    return found if isinstance(found, Mapping) else None


def latest(history: Sequence[Item]) -> Mapping[str, Any] | None:
    """The newest decision on the branch (the state the next turn starts from)."""
    for item in reversed(history):
        found = decision(item)
        if found is not None:
            return found
    return None


def restriction(history: Sequence[Item]) -> Mapping[str, Any] | None:
    """The decision that keeps the conversation's tools restricted, if one does: its
    ``safe_tools`` name the tools left (None: those without side effects). A restriction is
    carried by every later decision, so the newest one says."""
    found = latest(history)
    return found if found is not None and found.get("restricted") else None


def labels(found: Mapping[str, Any]) -> tuple[str, ...]:
    """A decision's actions as bounded metric labels (``allow`` when it asked for none)."""
    actions = tuple(a for a in found.get("actions", ()) if a in ACTIONS)
    return actions or (ALLOW,)


def describe(found: Mapping[str, Any]) -> str:
    """One line for a decision: its risk, actions and strongest signals."""
    signals = sorted(found.get("signals", ()), key=lambda s: -float(s.get("score", 0)))
    named = ", ".join(f"{s['name']} {float(s['score']):.2f}" for s in signals[:3]
                      if float(s.get("score", 0)) > 0)
    actions = ", ".join(found.get("actions", ())) or ALLOW
    return (f"risk {float(found.get('risk', 0)):.2f} → {actions}"
            + (f" ({named})" if named else ""))
