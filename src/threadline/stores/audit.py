"""The AuditBackend protocol: what an audit export reads from the log, by time.

The Store protocol reads by conversation; an export reads by UTC day, so it needs to find the
conversations active on each day of a window without opening every conversation (one indexed
read for the whole window, not one per day), and then to read many
conversations at once: one statement for a whole batch's calls, two for their items on every
branch and their branches (read apart, so an export can encode the calls while it builds the
rest), not several per conversation, and the exact requests of the calls in the window
without decoding each call's delta chain from its root again (``stores/delta.py``). Calls
come with their response and prefix report as stored (canonical JSON), so what an export
writes of them is the log's own text, not a re-encoding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple, Protocol

from threadline.items import Branch, Item, ItemKind, item_text

RENDERED_PROMPT = "rendered-prompt"  # the exact request is the prompt the backend rendered
CANONICAL_JSON = "canonical-json"    # or the provider payload of model, messages and params


@dataclass(frozen=True)
class ExactRequest:
    """A call's request as the model consumed it (``SentRequest.exact_bytes``)."""

    data: bytes
    encoding: str  # RENDERED_PROMPT | CANONICAL_JSON


class StoredPrefix(Protocol):
    """What an export reads of a call's stored prefix report (``cache/prefix.py``'s
    ``PrefixReport``): its counts and its cause."""

    @property
    def prompt_bytes(self) -> int: ...
    @property
    def reused_bytes(self) -> int: ...
    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def reused_tokens(self) -> int | None: ...
    @property
    def cause(self) -> str: ...


class LoggedCall(NamedTuple):
    """A call as an export reads it: ``ModelCall``'s columns, flat, its response and prefix
    report as stored, and only what pricing reads of them decoded; a tuple, like
    ``LoggedItem``, as a frozen dataclass sets each of its fields through ``object.__setattr__``
    (an export builds thousands a day)."""

    id: str
    conversation_id: str
    branch: str
    turn: int
    head_seq: int
    reply_seq: int | None
    status: str                  # a ``CallStatus``
    model: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    ttft_ms: float | None
    total_ms: float
    started_at: datetime
    error: str | None
    purpose: str
    response_json: str           # ``ModelCall.response`` as stored: canonical JSON
    prefix_json: str | None      # ``ModelCall.prefix`` as stored
    prefix: StoredPrefix | None  # decoded from ``prefix_json``
    usage: Any                   # the response's ``usage``, decoded: None where it has none
    request: ExactRequest | None  # for a call started in the window read, else None


class LoggedItem(NamedTuple):
    """An item as an export reads it: ``Item``'s fields less its parent and client message
    id, as a tuple (an export reads thousands a day, and builds a tuple several times faster
    than a frozen ``Item``)."""

    conversation_id: str
    seq: int
    branch: str
    turn: int
    kind: ItemKind
    content: Mapping[str, Any]
    hash: str
    created_at: datetime

    @property
    def text(self) -> str:
        return item_text(self.kind, self.content)


@dataclass(frozen=True)
class LoggedConversation:
    id: str
    items: list[LoggedItem]  # every item, on every branch, by seq
    branches: list[Branch]   # as ``Store.branches`` lists them


class AuditBackend(Protocol):
    def activity(self, start: datetime, end: datetime) -> dict[date, list[str]]:
        """Each UTC day with an item or a call in [start, end), in order, with the ids of the
        conversations that had one that day, sorted."""
        ...

    def items(self, conversation_id: str) -> list[Item]:
        """Every item of the conversation, on every branch, by seq."""
        ...

    def calls(self, conversation_ids: Sequence[str], start: datetime, end: datetime
              ) -> dict[str, list[LoggedCall]]:
        """Each conversation's calls as ``Store.calls`` lists them, in the order the ids are
        given (one with no call, or deleted meanwhile, is left out); each call started in
        [start, end) with its exact request."""
        ...

    def conversations(self, conversation_ids: Sequence[str]) -> list[LoggedConversation]:
        """The conversations' items and branches, in the order given (one deleted meanwhile
        is left out)."""
        ...
