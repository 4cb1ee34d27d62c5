"""Ingest: validate the user's message and make it durable before any model is called.

A message carrying a client message id that was seen before is not written again: ingest
returns the first message (and its reply, if the turn completed), so a retried send from a
flaky client never creates a second turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threadline.errors import ClientMessageConflict, InputError
from threadline.items import Item, ItemKind, NewItem, new_id, validate_text
from threadline.stores.base import Commit, LeaseClaim, NewConversation, Store


@dataclass(frozen=True)
class Ingested:
    conversation_id: str
    branch: str
    message: Item
    created: bool            # False when the client message id had been seen before
    reply: Item | None = None  # the finished turn's reply, for a retried send
    context: tuple[Item, ...] = ()  # what the turn's providers found, recorded after it


def turn_reply(history: Sequence[Item], message: Item) -> Item | None:
    """The reply that answered ``message``: the final assistant reply of its turn or, where
    that turn never got one (its holder crashed, or its call failed) and later messages
    followed, the reply of the first later turn that completed, made with it in view."""
    reply = None
    for item in history:
        if item.seq <= message.seq:
            continue
        if item.kind is ItemKind.USER and reply is not None:
            break
        if item.kind is ItemKind.ASSISTANT:
            reply = item
    return reply


def retried(store: Store, text: str, *, conversation_id: str | None, branch: str,
            client_msg_id: str | None) -> Ingested | None:
    """The first send of this message, if its client message id was seen before (a retry);
    ClientMessageConflict if the id was used for something else."""
    if client_msg_id is None:
        return None
    if not client_msg_id.strip() or len(client_msg_id) > 200:
        raise InputError(f"invalid client message id {client_msg_id!r}: use 1-200 "
                         "characters, e.g. a UUID")
    return _seen(store, text, conversation_id, branch, client_msg_id)


def ingest(store: Store, text: str, *, clock: Callable[[], datetime], max_bytes: int,
           conversation_id: str | None = None, branch: str = "main",
           client_msg_id: str | None = None, system: str | None = None,
           context: Sequence[NewItem] = (), lease: LeaseClaim | None = None,
           follows: int | None = None, metadata: Mapping[str, Any] | None = None) -> Ingested:
    """Append the user's message (and after it, in the same commit, ``context``: what the
    turn's providers found), taking the conversation's lease in that commit with ``lease``
    (:class:`~threadline.stores.base.LeaseTaken` if another holder has it: nothing written).
    With ``follows``, only while the branch's head is that item (else TurnSuperseded).
    A new conversation is created with ``system`` and ``metadata``."""
    text = validate_text(text, max_bytes=max_bytes)
    seen = retried(store, text, conversation_id=conversation_id, branch=branch,
                   client_msg_id=client_msg_id)
    if seen is not None:
        return seen
    if conversation_id is None:
        conversation_id = new_id("c_")
        result = store.commit(Commit(
            conversation_id=conversation_id, created_at=clock(), branch="main",
            create=NewConversation(conversation_id, system=system, metadata=metadata or {}),
            expected_head=None,
            items=[NewItem.user(text, client_msg_id=client_msg_id), *context]))
        return Ingested(conversation_id, "main", result.items[0], created=True,
                        context=tuple(result.items[1:]))
    try:
        # a new message depends on nothing already in the branch (unless the caller says what
        # it follows): it goes after whatever the head is when the transaction runs, so
        # concurrent senders queue rather than conflict
        result = store.commit(Commit(
            conversation_id=conversation_id, created_at=clock(), branch=branch,
            check_head=follows is not None, expected_head=follows,
            items=[NewItem.user(text, client_msg_id=client_msg_id), *context], take_lease=lease))
    except ClientMessageConflict:
        if client_msg_id is None:
            raise
        seen = _seen(store, text, conversation_id, branch, client_msg_id)
        if seen is None:
            raise
        return seen  # a concurrent retry of the same send won the race
    return Ingested(conversation_id, branch, result.items[0], created=True,
                    context=tuple(result.items[1:]))


def _seen(store: Store, text: str, conversation_id: str | None, branch: str,
          client_msg_id: str) -> Ingested | None:
    message = store.find_client_message(client_msg_id)
    if message is None:
        return None
    if conversation_id is not None and message.conversation_id != conversation_id:
        raise ClientMessageConflict(client_msg_id, f"a message in conversation "
                                    f"{message.conversation_id}")
    if message.kind is not ItemKind.USER or message.text != text:
        raise ClientMessageConflict(client_msg_id, f"a different message (item {message.seq})")
    history = store.history(message.conversation_id, message.branch)
    return Ingested(message.conversation_id, message.branch, message, created=False,
                    reply=turn_reply(history, message))
