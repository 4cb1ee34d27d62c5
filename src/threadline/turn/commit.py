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
from threadline.items import Item, NewItem
from threadline.models.calling import CallOutcome, call_record
from threadline.request import Request
from threadline.stores.base import Commit, Store


def commit_reply(store: Store, *, head: Item, branch: str, request: Request,
                 outcome: CallOutcome, model_id: str, clock: Callable[[], datetime],
                 prefix: Mapping[str, Any] | None = None,
                 items: Sequence[NewItem] | None = None) -> tuple[Item, ModelCall]:
    """Append what the call produced (its reply; or ``items``, the tool calls it asked for)
    with its record. Returns the last item appended and the record."""
    assert outcome.completion is not None
    call = call_record(head=head, branch=branch, request=request, outcome=outcome,
                       model_id=model_id, prefix=prefix)
    try:
        result = store.commit(Commit(
            conversation_id=head.conversation_id, created_at=clock(), branch=branch,
            expected_head=head.seq,
            items=items or [NewItem.assistant(outcome.completion.text)],
            call=call, call_reply_index=0))
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
