"""Tool-result clearing (observation masking): the lightest compaction.

Tool output is long and mostly spent once the model has reasoned about it; the calls and the
reasoning are short and stay. Results older than the newest ``keep`` call/result pairs become a
placeholder naming their item, so ``fetch_item`` (``Engine.item``, or the model through
``FETCH_ITEM_TOOL``) brings any of them back verbatim; excluded tools' results are never
cleared.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from threadline.compaction.view import ContextView
from threadline.errors import UnknownItem
from threadline.items import ItemKind
from threadline.request import ToolSpec
from threadline.stores.base import Store


def clearable(view: ContextView, *, keep: int, exclude: Collection[str] = ()) -> list[int]:
    """Seqs of the tool results a clearing would replace, oldest first."""
    names = {i.content["call_id"]: i.content["name"] for i in view.items
             if i.kind is ItemKind.TOOL_CALL}
    results = [i for i in view.items if i.kind is ItemKind.TOOL_RESULT]
    older = results[: max(0, len(results) - keep)]
    return [i.seq for i in older if i.seq not in view.cleared
            and names.get(i.content["call_id"]) not in exclude]


FETCH_ITEM_TOOL = ToolSpec(
    name="fetch_item",
    description="Read a log item verbatim by its number, e.g. a tool result that was cleared "
                "from the context to save space (its placeholder names the number).",
    parameters={"type": "object", "additionalProperties": False, "required": ["item"],
                "properties": {"item": {"type": "integer", "minimum": 1}}})


def fetch_item(store: Store, conversation_id: str, arguments: Mapping[str, Any]) -> str:
    """The ``fetch_item`` tool's result: the item's text verbatim, or an error the model can act
    on (an unknown number, a malformed argument)."""
    seq = arguments.get("item")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        return 'error: fetch_item needs {"item": N}, the item number a placeholder names'
    try:
        item = store.item(conversation_id, seq)
    except UnknownItem:
        return f"error: there is no item {seq} in this conversation"
    return item.text
