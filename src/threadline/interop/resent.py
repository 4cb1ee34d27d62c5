"""Where a resent history belongs: durable conversations for clients that keep no state.

Most chat clients resend the whole message list on every call. Each resent history is placed
in the log by its transcript hashes (``items.transcript_hash``: chained over the system prompt
and the user and assistant messages, as a client sees them), looked up through an index, so
placing costs the same with ten conversations stored or ten million:

- a history that is a branch's whole transcript **continues** that branch;
- one that ends in the branch's unanswered message (a failed turn resent) **answers** it;
- one that matches a branch up to message k and then differs (the client edited or
  regenerated) **forks** at k, and the messages after k are written to the new branch; the
  original stays intact;
- one that matches nothing is **imported** as a new conversation.

Then the turn runs there. With an explicit conversation, the history must agree with it:
a disagreement is refused with the first differing message's index (HistoryMismatch), or,
if the caller asks, forked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from threadline.errors import ConflictError, InputError, MessageTooLarge
from threadline.items import NewItem, new_id, transcript_hash, transcript_root, utc_now
from threadline.stores.base import MAIN, Commit, NewConversation, Store, TranscriptMatch
from threadline.turn.fork import fork

How = Literal["continued", "answered", "forked", "imported", "new"]


@dataclass(frozen=True)
class Resent:
    """What a client sent: its system prompt (None: it sent none), the messages before the
    new one as (role, text), role ``user`` or ``assistant``, and the new user message."""

    system: str | None
    history: tuple[tuple[str, str], ...]
    text: str
    offset: int = 0  # where ``history`` starts in the client's own message list


@dataclass(frozen=True)
class Placement:
    """Where the turn runs, and what must be written before it."""

    how: How
    conversation_id: str | None  # None: a new conversation
    branch: str = MAIN
    matched: int = 0             # history messages found in the log
    fork_from: int | None = None  # the item a fork grows from
    system: str | None = None    # a new conversation's
    owner: str | None = None     # a new conversation's
    write: tuple[NewItem, ...] = ()  # history messages the log lacks

    def to_json(self) -> dict[str, object]:
        return {"how": self.how, "matched": self.matched, "fork_from": self.fork_from}


class HistoryMismatch(ConflictError):
    def __init__(self, conversation_id: str, index: int, matched: int) -> None:
        super().__init__(
            f"the resent history disagrees with conversation {conversation_id} from message "
            f"{index} on (the {matched} messages before it match the log); nothing was "
            "written",
            hint="send only the new message to continue the conversation, send the history "
                 "it holds (GET /v1/conversations/{id}), or ask for a fork with "
                 "X-Threadline-On-Mismatch: fork")
        self.details = {"first_differing_index": index, "matched": matched}


def transcript_hashes(resent: Resent, system: str | None) -> list[str]:
    """The transcript hash after each message of the history, from ``system``'s root."""
    out, current = [], transcript_root(system)
    for role, text in resent.history:
        current = transcript_hash(current, role, text)
        out.append(current)
    return out


def place(store: Store, resent: Resent, *, conversation_id: str | None = None,
          on_mismatch: Literal["refuse", "fork"] = "refuse",
          user_id: str | None = None) -> Placement:
    """Where ``resent`` belongs (reads only). With ``conversation_id``, only there; a client
    that sent no system prompt then takes the conversation's. With ``user_id``, only among
    that user's conversations, and a new one is theirs."""
    system = resent.system
    if conversation_id is not None:
        conversation = store.conversation(conversation_id)  # unknown ids: NotFound
        if not resent.history:  # only the new message: the server keeps the history
            return Placement("continued", conversation_id)
        if system is None:
            system = conversation.system
    hashes = transcript_hashes(resent, system)
    if not hashes:
        return Placement("new", None, system=system, owner=user_id)

    def found_at(depth: int) -> list[TranscriptMatch]:
        return store.matching_messages([hashes[depth - 1]], conversation_id=conversation_id,
                                       user_id=user_id, limit=_CANDIDATES)

    # the common case, a client continuing, is one lookup of the whole history; otherwise
    # a binary search for the longest prefix the log holds (a chain that holds a message
    # holds every message before it)
    found, matched = found_at(len(hashes)), len(hashes)
    if not found:
        low, high = 0, len(hashes) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if rows := found_at(middle):
                low, found = middle, rows
            else:
                high = middle - 1
        matched = low
    placement = _best(store, resent, hashes, found, matched, system, user_id)
    if conversation_id is not None and placement.how not in ("continued", "answered"):
        if on_mismatch == "refuse":
            raise HistoryMismatch(conversation_id, resent.offset + matched, matched)
        if placement.conversation_id is None:  # nothing matched: a new root branch there
            return Placement("forked", conversation_id, matched=0, write=placement.write)
    return placement


_CANDIDATES = 50  # conversations holding a prefix considered, newest first


def _best(store: Store, resent: Resent, hashes: list[str], candidates: list[TranscriptMatch],
          matched: int, system: str | None, owner: str | None) -> Placement:
    rest = tuple(_message(role, text) for role, text in resent.history[matched:])
    if not candidates:
        return Placement("imported", None, system=system, owner=owner, write=rest)
    if matched == len(hashes):
        tip = hashes[-1]
        unanswered = transcript_hash(tip, "user", resent.text)
        # newest conversation first (ids are time-ordered), and in each, main first
        for cid in sorted({m.conversation_id for m in candidates}, reverse=True):
            heads = _branch_heads(store, cid)
            ways: tuple[tuple[str, How], ...] = ((tip, "continued"), (unanswered, "answered"))
            for wanted, how in ways:
                branch = next((name for name, digest in heads if digest == wanted), None)
                if branch is not None:
                    return Placement(how, cid, branch, matched)
    point = max(candidates, key=lambda m: (m.conversation_id, m.seq))
    return Placement("forked", point.conversation_id, matched=matched, fork_from=point.seq,
                     write=rest)


def _branch_heads(store: Store, conversation_id: str) -> list[tuple[str, str | None]]:
    """Each branch and the transcript hash at its head, main first, then newest first."""
    out = []
    for branch in store.branches(conversation_id):
        head = store.head(conversation_id, branch.name)
        out.append((branch.name, None if head is None else
                    store.transcript(conversation_id, head.seq),
                    branch.name != MAIN, -(head.seq if head else 0)))
    return [(name, digest) for name, digest, *_ in sorted(out, key=lambda row: row[2:])]


def settle(store: Store, placement: Placement, *,
           clock: Callable[[], datetime] = utc_now) -> tuple[str, str]:
    """Write what ``placement`` needs before the turn (a new conversation, or a fork, with
    the history messages the log lacked), in one commit; the conversation and branch the
    turn then runs on."""
    if placement.conversation_id is None:
        cid = new_id("c_")
        store.commit(Commit(conversation_id=cid, created_at=clock(), expected_head=None,
                            create=NewConversation(cid, system=placement.system,
                                                   owner=placement.owner),
                            items=placement.write))
        return cid, MAIN
    if placement.how != "forked":
        return placement.conversation_id, placement.branch
    branch = fork(store, placement.conversation_id, placement.fork_from, clock=clock,
                  items=placement.write)
    return placement.conversation_id, branch.name


def _message(role: str, text: str) -> NewItem:
    return NewItem.user(text) if role == "user" else NewItem.assistant(text)


def resent_from(messages: Sequence[tuple[str, str]], *, max_bytes: int) -> Resent:
    """A :class:`Resent` from a client's (role, text) list: leading system messages, then
    user and assistant messages ending in the new user message. Refuses anything else with
    what was wrong, before anything is written."""
    systems = 0
    while systems < len(messages) and messages[systems][0] in _SYSTEM_ROLES:
        systems += 1
    rest = list(messages[systems:])
    if not rest or rest[-1][0] != "user":
        raise InputError("the last message must be the new one, with role 'user'",
                         hint="send the history (or nothing) before it, then the new message")
    for index, (role, text) in enumerate(rest, systems):
        if role not in ("user", "assistant"):
            where = "after the first message" if role in _SYSTEM_ROLES else ""
            raise InputError(f"message {index} has role {role!r}{where and ' ' + where}; a "
                             "resent history holds system messages first, then user and "
                             "assistant messages",
                             hint="threadline runs tools on the server: resend only what the "
                                  "user and the assistant said")
        if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            raise MessageTooLarge(len(text.encode("utf-8", "surrogatepass")), max_bytes)
    system = "\n\n".join(text for _, text in messages[:systems]) if systems else None
    return Resent(system, tuple(rest[:-1]), rest[-1][1], offset=systems)


_SYSTEM_ROLES = ("system", "developer")  # "developer" is the newer OpenAI clients' name
