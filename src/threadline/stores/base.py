"""The Store protocol: the durable, append-only log every backend implements.

All writes go through one method, :meth:`Store.commit`, and one commit is one transaction: it
may create the conversation or a branch, appends items (each chained to its parent by hash),
and records a model call. A commit carries the branch head it was computed against; if the
head has moved, nothing is written and :class:`~threadline.errors.TurnSuperseded` is raised.

Beside the log, a store may keep long-term memory (``memory``: a
:class:`~threadline.stores.memory.MemoryBackend`), retrieval corpora (``corpora``: a
:class:`~threadline.stores.corpus.CorpusBackend`), the HTTP service's bearer tokens
(``tokens``: a :class:`~threadline.stores.tokens.TokenBackend`) and Responses API response
records (``responses``: a :class:`~threadline.stores.responses.ResponseBackend`) in the same
database. A store that keeps none of one says so with None there, and what needs it refuses
it with an InputError.

``stores/conformance.py`` states this behaviour as tests any backend can run (with
``memory_conformance.py``, ``corpus_conformance.py`` and ``tokens_conformance.py`` for what it
keeps beside the log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from threadline.calls import ModelCall
from threadline.items import Branch, Conversation, Item, NewItem
from threadline.stores.audit import AuditBackend
from threadline.stores.browse import BrowseBackend
from threadline.stores.corpus import CorpusBackend
from threadline.stores.memory import MemoryBackend
from threadline.stores.records import ConversationSummary as ConversationSummary  # re-exported
from threadline.stores.records import Generation as Generation
from threadline.stores.responses import ResponseBackend
from threadline.stores.tokens import TokenBackend

MAIN = "main"


@dataclass(frozen=True)
class NewConversation:
    id: str
    title: str | None = None
    system: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    owner: str | None = None  # the user whose conversation it is; fixed once created


@dataclass(frozen=True)
class NewBranch:
    """Create ``name`` as a fork that grows from item ``from_seq`` (kept intact where it is);
    with ``from_seq`` None, a new root: a branch that shares no history."""

    name: str
    from_seq: int | None


@dataclass(frozen=True)
class Lease:
    granted: bool             # the asking holder holds it now
    holder: str
    expires_at: float         # seconds since the epoch
    cancel_requested: bool = False


@dataclass(frozen=True)
class LeaseClaim:
    """Take the conversation's lease for ``holder`` until ``now + ttl_s`` in a commit."""

    holder: str
    ttl_s: float
    now: float


class LeaseTaken(Exception):
    """A commit that claimed the lease found another holder's live lease: nothing was
    written. ``lease`` says whose it is and until when."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(f"the conversation's lease is held by {lease.holder}")
        self.lease = lease


@dataclass(frozen=True)
class Commit:
    """One transaction against one branch of one conversation.

    ``expected_head`` is the seq of the branch head the caller computed against (None for an
    empty branch); ``check_head=False`` appends after whatever the head is, for writes that
    depend on nothing in the branch (a new user message, a failed call's record).
    ``call_reply_index`` names the item in ``items`` that is the recorded call's reply.
    ``take_lease`` takes the conversation's lease in the same transaction (a turn's first
    write), and ``release_lease`` gives the holder's lease back in it (a turn's last), so a
    turn under a lease costs two durable writes.
    """

    conversation_id: str
    created_at: datetime
    branch: str = MAIN
    expected_head: int | None = None
    check_head: bool = True
    items: Sequence[NewItem] = ()
    call: ModelCall | None = None
    call_reply_index: int | None = None
    create: NewConversation | None = None
    fork: NewBranch | None = None
    take_lease: LeaseClaim | None = None
    release_lease: str | None = None  # the holder whose lease the commit gives back


@dataclass(frozen=True)
class CommitResult:
    items: list[Item]
    call: ModelCall | None = None
    branch: Branch | None = None  # set when the commit created a branch


@dataclass(frozen=True)
class TranscriptMatch:
    """A message item whose transcript hash (``items.transcript_hash``) was asked for."""

    transcript: str
    conversation_id: str
    seq: int
    branch: str


class Store(Protocol):
    """A durable conversation log. Every method either completes or changes nothing."""

    path: str  # where the data lives, for messages

    @property
    def memory(self) -> MemoryBackend | None:
        """Users' long-term memory, kept beside the log (None: this store keeps none)."""
        ...

    @property
    def corpora(self) -> CorpusBackend | None:
        """Retrieval corpora, kept beside the log (None: this store keeps none)."""
        ...

    @property
    def tokens(self) -> TokenBackend | None:
        """The HTTP service's bearer tokens, kept beside the log (None: this store keeps
        none, so a service over it cannot require them)."""
        ...

    @property
    def responses(self) -> ResponseBackend | None:
        """What Responses API response ids name, kept beside the log (None: none kept)."""
        ...

    @property
    def audit(self) -> AuditBackend | None:
        """The log read by time, for audit exports (None: this store cannot be exported)."""
        ...

    @property
    def browse(self) -> BrowseBackend | None:
        """The log read a page at a time, for the inspector (None: it cannot be browsed)."""
        ...

    def commit(self, commit: Commit) -> CommitResult: ...

    def conversation(self, conversation_id: str, *, as_read: bool = False) -> Conversation:
        """UnknownConversation if there is none. ``as_read``: the row as this handle last
        read it, when it has (a branch's history read brings it along), without reading it
        again: a conversation's row never changes once written; that it still exists is for
        a read to say."""
        ...

    def conversations(self, *, limit: int | None = None,
                      owner: str | None = None) -> list[ConversationSummary]:
        """Newest activity first; with ``owner``, only that user's conversations."""
        ...

    def summary(self, conversation_id: str) -> ConversationSummary: ...

    def delete_conversation(self, conversation_id: str) -> None:
        """Remove a conversation with its branches, items and calls."""
        ...

    def branches(self, conversation_id: str) -> list[Branch]: ...

    def head(self, conversation_id: str, branch: str = MAIN) -> Item | None:
        """The newest item on a branch (for a fresh fork, the item it grows from)."""
        ...

    def history(self, conversation_id: str, branch: str = MAIN, *,
                through: Item | None = None) -> Sequence[Item]:
        """Every item on a branch, root first, including what it inherited from its parents;
        with ``through`` (an item of the branch), only as far as that item: the branch as it
        was when ``through`` was its head, which never changes, so a store that already holds
        it need not read."""
        ...

    def item(self, conversation_id: str, seq: int) -> Item: ...

    def find_client_message(self, client_msg_id: str) -> Item | None: ...

    def matching_messages(self, hashes: Sequence[str], *, conversation_id: str | None = None,
                          user_id: str | None = None,
                          limit: int | None = None) -> list[TranscriptMatch]:
        """The user and assistant messages whose transcript hash is one of ``hashes``, in
        any conversation (or in one; or in those ``user_id`` owns), newest first, at most
        ``limit``: where a resent history is in the log. An indexed lookup, whatever the
        number of conversations."""
        ...

    def transcript(self, conversation_id: str, seq: int) -> str | None:
        """Item ``seq``'s transcript hash: its conversation's visible messages up to it."""
        ...

    def call(self, call_id: str) -> ModelCall: ...

    def last_call(self, conversation_id: str, branch: str | None = None) -> ModelCall | None:
        """The newest turn call (not a side call) on a branch (any branch with None), with its
        request."""
        ...

    def calls(self, conversation_id: str, *, branch: str | None = None) -> list[ModelCall]:
        """Calls in the order they were made. Listing omits requests (``request`` is None)."""
        ...

    def lease(self, conversation_id: str, holder: str, ttl_s: float, now: float) -> Lease:
        """Take or renew the conversation's lease for ``holder`` until ``now + ttl_s``, unless
        another holder's lease is still live; says who holds it either way."""
        ...

    def renew_lease(self, conversation_id: str, holder: str, ttl_s: float, now: float) -> Lease:
        """Extend ``holder``'s lease to ``now + ttl_s``; never takes one (granted False when
        the holder no longer holds it)."""
        ...

    def lease_holder(self, conversation_id: str, now: float) -> Lease | None:
        """The live lease on the conversation (granted False: it is someone's), or None."""
        ...

    def release_lease(self, conversation_id: str, holder: str) -> None:
        """Give the lease back (a no-op if ``holder`` no longer holds it)."""
        ...

    def request_cancel(self, conversation_id: str, now: float) -> bool:
        """Ask the current holder to stop; False when no live lease is held."""
        ...

    def save_generation(self, generation: Generation, at: datetime) -> None:
        """Record a generation's progress (the whole text so far; a later save replaces it)."""
        ...

    def generation(self, generation_id: str) -> Generation | None:
        ...

    def close(self) -> None: ...


def append(store: Store, conversation_id: str, branch: str, at: datetime,
           *items: NewItem) -> list[Item]:
    """Append ``items`` after whatever the branch's head is: for writes that depend on nothing
    in the branch (a note, a constraint, a working state)."""
    return store.commit(Commit(conversation_id=conversation_id, branch=branch, created_at=at,
                               check_head=False, items=items)).items
