"""Commit: append the reply and its model-call record in one transaction.

The commit carries the branch head the request was assembled against; if another writer moved
the branch meanwhile, nothing is appended and the call is recorded as superseded instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from threadline.calls import ModelCall
from threadline.errors import TurnSuperseded
from threadline.items import Item, ItemKind, NewItem
from threadline.models.calling import CallOutcome, call_record
from threadline.request import Request
from threadline.stores.base import Commit, Store
from threadline.turn.providers import Served


def commit_reply(store: Store, *, head: Item, branch: str, request: Request,
                 outcome: CallOutcome, model_id: str, clock: Callable[[], datetime],
                 prefix: Mapping[str, Any] | None = None,
                 items: Sequence[NewItem] | None = None,
                 release_lease: str | None = None) -> tuple[Item, ModelCall]:
    """Append what the call produced (its reply; or ``items``, the tool calls it asked for)
    with its record; ``release_lease`` gives that holder's lease back in the same commit.
    Returns the last item appended and the record."""
    assert outcome.completion is not None
    call = call_record(head=head, branch=branch, request=request, outcome=outcome,
                       model_id=model_id, prefix=prefix)
    try:
        result = store.commit(Commit(
            conversation_id=head.conversation_id, created_at=clock(), branch=branch,
            expected_head=head.seq,
            items=items or [NewItem.assistant(outcome.completion.text)],
            call=call, call_reply_index=0, release_lease=release_lease))
    except TurnSuperseded as err:
        record_failure(store, head=head, branch=branch, request=request, outcome=outcome,
                       model_id=model_id, clock=clock, error=f"superseded: {err.message}",
                       prefix=prefix)
        raise
    assert result.call is not None
    return result.items[-1], result.call


def record_failure(store: Store, *, head: Item, branch: str, request: Request,
                   outcome: CallOutcome, model_id: str, clock: Callable[[], datetime],
                   error: str | None = None,
                   prefix: Mapping[str, Any] | None = None) -> ModelCall:
    call = call_record(head=head, branch=branch, request=request, outcome=outcome,
                       model_id=model_id, error=error, prefix=prefix)
    result = store.commit(Commit(conversation_id=head.conversation_id, created_at=clock(),
                                 branch=branch, check_head=False, call=call))
    assert result.call is not None
    return result.call


def commit_served(store: Store, served: Served, *, head: Item, branch: str,
                  clock: Callable[[], datetime], release_lease: str | None = None) -> Item:
    """Append a reply a provider served (an answer given before): it says where it came
    from, and no call is recorded for it."""
    return store.commit(Commit(
        conversation_id=head.conversation_id, created_at=clock(), branch=branch,
        expected_head=head.seq, items=[NewItem(ItemKind.ASSISTANT, {
            "text": served.text, "cached": dict(served.record)})],
        release_lease=release_lease)).items[0]
