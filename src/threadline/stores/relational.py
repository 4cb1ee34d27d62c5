"""The conversation log over SQL, shared by the SQLite and PostgreSQL stores.

Everything a :class:`~threadline.stores.base.Store` does with the log is written here once, in
the SQL both databases understand (``?`` placeholders; the PostgreSQL store rewrites them). A
backend supplies only how to open a transaction or a read, which column orders calls, how a
conversation is locked for a commit, which constraint an integrity error broke, and its
full-text search (``stores/fulltext.py``) for the memory and corpora it keeps beside the log
(``memory_sql.py``, ``corpus_sql.py``, reached through ``memory`` and ``corpora``), and the
Responses API records (``responses_sql.py``, through ``responses``). Model calls and their
exact requests are ``calls_sql.py``'s, and leases and generations ``turn_state.py``'s, both
mixed in.

A commit locks its conversation first (SQLite's ``BEGIN IMMEDIATE`` already holds the whole
database; PostgreSQL takes the conversation row ``FOR UPDATE``), so the version check and the
next seq are read by the only writer of that conversation.
"""

from __future__ import annotations

import json
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any, ClassVar, Literal, TypeVar

from threadline.calls import CallStatus, ModelCall, SentRequest
from threadline.errors import (
    ClientMessageConflict,
    InputError,
    TurnSuperseded,
    UnknownBranch,
    UnknownConversation,
    UnknownItem,
)
from threadline.items import (
    Branch,
    Conversation,
    Item,
    ItemKind,
    canonical_json,
    chain_hash_json,
    format_time,
    parse_time,
    transcript_after,
)
from threadline.sequences import Chunked
from threadline.stores.audit import AuditBackend
from threadline.stores.audit_sql import SQLAudit
from threadline.stores.base import (
    MAIN,
    Commit,
    CommitResult,
    ConversationSummary,
    LeaseTaken,
)
from threadline.stores.browse import BrowseBackend
from threadline.stores.browse_sql import SQLBrowse
from threadline.stores.calls_sql import CallsSQL
from threadline.stores.corpus import CorpusBackend
from threadline.stores.corpus_sql import SQLCorpora
from threadline.stores.fulltext import FullText
from threadline.stores.memory import MemoryBackend
from threadline.stores.memory_sql import SQLMemory
from threadline.stores.responses import ResponseBackend
from threadline.stores.responses_sql import SQLResponses
from threadline.stores.rows import (
    CONVERSATION_COLUMNS,
    ITEM_COLUMNS,
    SUMMARY_COLUMNS,
    conversation_from_row,
    item_from_row,
    stored_time,
    summary_from_row,
)
from threadline.stores.sessions import Cursor, Database, Execute, Lineage, Session
from threadline.stores.tokens import TokenBackend
from threadline.stores.tokens_sql import SQLTokens
from threadline.stores.transcripts import TranscriptsSQL, fill_conversation, root_of
from threadline.stores.turn_state import TurnStateSQL

__all__ = ["Cursor", "Execute", "RelationalStore", "Session", "Violation"]

_HEAD = tuple[int, str, int, str]  # a branch head's seq, hash, turn and transcript hash
_NO_LIMIT = 2**62  # past any seq; also the bound a seq must be under to be looked up
_T = TypeVar("_T")
_REMEMBERED_ITEMS = 200_000      # items read before, kept per branch for the next read
_ITEMS_OF_I = ", ".join(f"i.{column.strip()}" for column in ITEM_COLUMNS.split(","))
_OF_C = ", ".join(f"c.{column}" for column in CONVERSATION_COLUMNS.split(", "))
_C = len(CONVERSATION_COLUMNS.split(", "))  # a history read's row: the conversation's first
_REMEMBERED_CONVERSATIONS = 4096  # rows as last read, for a turn's assembly

Violation = Literal["client_msg_id", "foreign_key", "other"]


class RelationalStore(CallsSQL, TurnStateSQL, TranscriptsSQL):
    """The Store protocol over SQL; subclasses connect it to a database."""

    path: str
    CALL_ORDER: ClassVar[str]          # the column that orders calls as they were recorded
    UTC_DAY: ClassVar[str]             # SQL for a stored time's UTC date, ``{}`` the column
    # the statement that makes a commit its conversation's only writer (None: the
    # transaction already is, and a deleted conversation shows up as a foreign-key error)
    LOCK_CONVERSATION: ClassVar[str | None]
    INTEGRITY_ERRORS: ClassVar[tuple[type[Exception], ...]]
    FULL_TEXT: ClassVar[FullText]      # the database's full-text search, for memory and corpora
    # a read outside a transaction is a local read that waits on no writer (TokenBackend)
    READS_IN_PLACE: ClassVar[bool] = False

    def __init__(self) -> None:
        self._cache_lock = threading.Lock()
        # the newest full request per (conversation, branch), and each branch's lineage
        self._requests: OrderedDict[tuple[str, str], tuple[str, SentRequest]] = OrderedDict()
        self._lineages: dict[tuple[str, str], Lineage] = {}
        # each recently read branch's items, oldest first: the next read fetches only the rest
        self._histories: OrderedDict[tuple[str, str], Chunked[Item]] = OrderedDict()
        self._history_items = 0
        # each recently read conversation's row (a row never changes once written): a turn
        # assembles from the one its history read brought, without reading it again
        self._conversations: OrderedDict[str, tuple[tuple[Any, ...], Conversation]] = \
            OrderedDict()
        self._database = Database(self._transaction, self._reading, self.INTEGRITY_ERRORS)
        self._memory = SQLMemory(self._database, self.FULL_TEXT)
        self._corpora: SQLCorpora | None = None
        self._tokens = SQLTokens(self._database, in_place=self.READS_IN_PLACE)
        self._responses = SQLResponses(self._database)
        self._audit = SQLAudit(self._database, self.CALL_ORDER, self.UTC_DAY)
        self._browse = SQLBrowse(self._database, self.CALL_ORDER)

    # -- the tables kept beside the log ----------------------------------------------------

    @property
    def memory(self) -> MemoryBackend:
        return self._memory

    @property
    def corpora(self) -> CorpusBackend:
        if self._corpora is None:  # preparing twice at once is harmless: it is idempotent
            self._prepare_corpora()
            self._corpora = SQLCorpora(self._database, self.FULL_TEXT)
        return self._corpora

    @property
    def tokens(self) -> TokenBackend:
        return self._tokens

    @property
    def responses(self) -> ResponseBackend:
        return self._responses

    @property
    def audit(self) -> AuditBackend:
        return self._audit

    @property
    def browse(self) -> BrowseBackend:
        return self._browse

    def _prepare_corpora(self) -> None:
        """Whatever the corpus tables need before first use, beyond the migrations."""

    # -- what a backend provides -----------------------------------------------------------

    def _begin(self) -> AbstractContextManager[Execute]:
        """A transaction: commits when the block ends, rolls back if it raises."""
        raise NotImplementedError

    def _connect(self) -> AbstractContextManager[Execute]:
        """A connection for reads."""
        raise NotImplementedError

    def _violation(self, err: Exception) -> Violation:
        """Which constraint an integrity error broke."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- sessions --------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with self._begin() as execute:
            session = Session(execute, writing=True)
            yield session
        self._committed(session)

    def _committed(self, session: Session) -> None:
        """What a transaction learnt, once it is durable."""
        with self._cache_lock:
            self._lineages.update(session.new_lineages)  # only what is now committed

    @contextmanager
    def _reading(self) -> Iterator[Session]:
        with self._connect() as execute:
            yield Session(execute, writing=False)

    def _session(self, *, write: bool = False) -> AbstractContextManager[Session]:
        """A transaction (``write``) or a read: for looking at the tables directly in tests;
        memory and corpora reach them through ``memory`` and ``corpora``."""
        return self._transaction() if write else self._reading()

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._reading() as db:
            return db.all(sql, params)

    # -- writes --------------------------------------------------------------------------

    def _write(self, work: Callable[[Session], _T]) -> _T:
        """``work`` in a transaction of its own (the SQLite store groups concurrent ones)."""
        with self._transaction() as db:
            return work(db)

    def commit(self, commit: Commit) -> CommitResult:
        items, call, new_branch = self._write(partial(self._commit_in, commit=commit))
        if items:
            self._appended((commit.conversation_id, commit.branch), items)
        if call is not None and call.request is not None and call.purpose == "turn" \
                and call.status is CallStatus.OK:
            self._remember(call, call.request)  # the next turn's request is stored against it
        return CommitResult(items=items, call=call, branch=new_branch)

    def _commit_in(self, db: Session, commit: Commit
                   ) -> tuple[list[Item], ModelCall | None, Branch | None]:
        created = format_time(commit.created_at)
        cid = commit.conversation_id
        new_branch = None
        if commit.create is not None:
            spec = commit.create
            if db.one("SELECT 1 FROM conversations WHERE id = ?", (spec.id,)):
                raise InputError(f"a conversation with id {spec.id!r} already exists")
            try:
                db.run(f"INSERT INTO conversations ({CONVERSATION_COLUMNS}) VALUES "
                       "(?, ?, ?, ?, ?, ?)", (spec.id, created, spec.title, spec.system,
                                              canonical_json(dict(spec.metadata)),
                                              spec.owner))
            except self.INTEGRITY_ERRORS as err:  # created by another writer meanwhile
                raise InputError(f"a conversation with id {spec.id!r} already exists"
                                 ) from err
            db.run("INSERT INTO branches (conversation_id, name, created_at) "
                   "VALUES (?, ?, ?)", (spec.id, MAIN, created))
        if self.LOCK_CONVERSATION is not None and \
                db.one(self.LOCK_CONVERSATION, (cid,)) is None:
            raise UnknownConversation(cid)
        if commit.take_lease is not None:
            claim = commit.take_lease
            lease = self._take_lease(db, cid, claim.holder, claim.ttl_s, claim.now)
            if not lease.granted:
                raise LeaseTaken(lease)  # rolls back: the turn waits, nothing written
        try:
            if commit.fork is not None:
                new_branch = self._insert_branch(db, commit, created)
            last_seq, head = self._write_position(db, cid, commit.branch)
            head_seq = None if head is None else head[0]
            if commit.check_head and head_seq != commit.expected_head:
                self._exists(db, cid)  # a conversation deleted meanwhile reads as empty
                raise TurnSuperseded(cid, commit.branch, commit.expected_head, head_seq)
            items = self._append_items(db, commit, last_seq + 1, head, created)
            call = None
            if commit.call is not None:
                reply_seq = None
                if commit.call_reply_index is not None:
                    reply_seq = items[commit.call_reply_index].seq
                call = self._insert_call(db, commit.call, reply_seq)
            if commit.release_lease is not None:
                db.run("DELETE FROM leases WHERE conversation_id = ? AND holder = ?",
                       (cid, commit.release_lease))
        except self.INTEGRITY_ERRORS as err:
            if self._violation(err) == "foreign_key":
                self._forget(cid)
                raise UnknownConversation(cid) from err
            raise
        return items, call, new_branch

    def _exists(self, db: Session, conversation_id: str) -> None:
        if db.one("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)) is None:
            self._forget(conversation_id)
            raise UnknownConversation(conversation_id)

    def _insert_branch(self, db: Session, commit: Commit, created: str) -> Branch:
        assert commit.fork is not None
        fork = commit.fork
        if not fork.name or fork.name != fork.name.strip() or len(fork.name) > 64:
            raise InputError(f"invalid branch name {fork.name!r}: use 1-64 characters, "
                             "no surrounding spaces")
        if db.one("SELECT 1 FROM branches WHERE conversation_id = ? AND name = ?",
                  (commit.conversation_id, fork.name)):
            raise InputError(f"conversation {commit.conversation_id} already has a branch "
                             f"named {fork.name!r}", hint="choose another name")
        parent = None
        if fork.from_seq is not None:
            row = None if not 0 < fork.from_seq < _NO_LIMIT else db.one(
                "SELECT branch FROM items WHERE conversation_id = ? AND seq = ?",
                (commit.conversation_id, fork.from_seq))
            if row is None:
                raise UnknownItem(commit.conversation_id, fork.from_seq)
            parent = row[0]
        db.run("INSERT INTO branches (conversation_id, name, parent, fork_seq, created_at) "
               "VALUES (?, ?, ?, ?, ?)",
               (commit.conversation_id, fork.name, parent, fork.from_seq, created))
        return Branch(commit.conversation_id, fork.name, parse_time(created), parent,
                      fork.from_seq)

    def _append_items(self, db: Session, commit: Commit, next_seq: int,
                      head: _HEAD | None, created: str) -> list[Item]:
        if not commit.items:
            return []
        if head is None:
            parent_seq, parent_hash, turn = None, None, 0
            spec = commit.create
            transcript = root_of(db, commit.conversation_id,
                                 None if spec is None else spec.system,
                                 creating=spec is not None)
        else:
            parent_seq, parent_hash, turn, transcript = head
        moment = parse_time(created)
        out = []
        for new in commit.items:
            turn = turn + 1 if new.kind is ItemKind.USER else turn
            digest = chain_hash_json(parent_hash, new.kind, new.content_json)
            transcript = transcript_after(transcript, new.kind, new.content)
            try:
                db.run(f"INSERT INTO items ({ITEM_COLUMNS}, transcript) "
                       "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       (commit.conversation_id, next_seq, commit.branch, parent_seq, turn,
                        str(new.kind), new.content_json, digest, created, new.client_msg_id,
                        transcript))
            except self.INTEGRITY_ERRORS as err:
                if new.client_msg_id and self._violation(err) == "client_msg_id":
                    raise ClientMessageConflict(new.client_msg_id, "another message") from err
                raise
            # the content as a read gives it back (the stored JSON, decoded)
            out.append(Item(commit.conversation_id, next_seq, commit.branch, parent_seq, turn,
                            new.kind, json.loads(new.content_json), digest, moment,
                            new.client_msg_id))
            parent_seq, parent_hash = next_seq, digest
            next_seq += 1
        return out

    def _forget(self, conversation_id: str) -> None:
        with self._cache_lock:
            for key in [k for k in self._requests if k[0] == conversation_id]:
                del self._requests[key]
            for key in [k for k in self._lineages if k[0] == conversation_id]:
                del self._lineages[key]
            self._conversations.pop(conversation_id, None)
            for key in [k for k in self._histories if k[0] == conversation_id]:
                self._history_items -= len(self._histories.pop(key))

    def delete_conversation(self, conversation_id: str) -> None:
        with self._transaction() as db:
            if db.run("DELETE FROM conversations WHERE id = ?", (conversation_id,)) == 0:
                raise UnknownConversation(conversation_id)
        self._forget(conversation_id)

    # -- reads ---------------------------------------------------------------------------

    def conversation(self, conversation_id: str, *, as_read: bool = False) -> Conversation:
        if as_read:
            with self._cache_lock:
                known = self._conversations.get(conversation_id)
            if known is not None:
                return known[1]
        rows = self._read(f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?",
                          (conversation_id,))
        if not rows:
            raise UnknownConversation(conversation_id)
        return self._remember_conversation(tuple(rows[0]))

    def _remember_conversation(self, row: tuple[Any, ...]) -> Conversation:
        with self._cache_lock:
            known = self._conversations.get(row[0])
            if known is not None and known[0] == row:
                self._conversations.move_to_end(row[0])
                return known[1]
        conversation = conversation_from_row(row)
        with self._cache_lock:
            self._conversations[row[0]] = (row, conversation)
            self._conversations.move_to_end(row[0])
            if len(self._conversations) > _REMEMBERED_CONVERSATIONS:
                self._conversations.popitem(last=False)
        return conversation

    def conversations(self, *, limit: int | None = None,
                      owner: str | None = None) -> list[ConversationSummary]:
        if owner is not None:
            return self._summaries("WHERE c.owner = ?", (owner,), limit)
        return self._summaries("", (), limit)

    def summary(self, conversation_id: str) -> ConversationSummary:
        found = self._summaries("WHERE c.id = ?", (conversation_id,), 1)
        if not found:
            raise UnknownConversation(conversation_id)
        return found[0]

    def _summaries(self, where: str, params: tuple[Any, ...],
                   limit: int | None) -> list[ConversationSummary]:
        limit_clause = "" if limit is None else f" LIMIT {int(limit)}"
        rows = self._read(f"SELECT {SUMMARY_COLUMNS} FROM conversations c {where}"
                          f" ORDER BY updated DESC, c.id DESC{limit_clause}", params)
        return [summary_from_row(row) for row in rows]

    def branches(self, conversation_id: str) -> list[Branch]:
        rows = self._read("SELECT name, created_at, parent, fork_seq FROM branches "
                          "WHERE conversation_id = ? ORDER BY created_at, name",
                          (conversation_id,))
        if not rows:
            self.conversation(conversation_id)  # raises UnknownConversation
        return [Branch(conversation_id, r[0], stored_time(r[1]), r[2], r[3]) for r in rows]

    def head(self, conversation_id: str, branch: str = MAIN) -> Item | None:
        with self._reading() as db:
            return self._head(db, conversation_id, branch)

    def _write_position(self, db: Session, conversation_id: str,
                        branch: str) -> tuple[int, _HEAD | None]:
        """The conversation's last seq and the branch head's (seq, hash, turn, transcript),
        read in one statement when the branch has items of its own (the common case)."""
        lineage = self._lineage(db, conversation_id, branch)
        name, limit = lineage[0]
        row = db.one(
            "SELECT (SELECT coalesce(max(seq), 0) FROM items WHERE conversation_id = ?),"
            " h.seq, h.hash, h.turn, h.transcript FROM (SELECT 1) AS one LEFT JOIN"
            " (SELECT seq, hash, turn, transcript FROM items WHERE conversation_id = ?"
            " AND branch = ? AND seq <= ? ORDER BY seq DESC LIMIT 1) AS h ON 1 = 1",
            (conversation_id, conversation_id, name, limit))
        last = int(row[0])
        if row[1] is not None:
            head_seq, digest, turn, transcript = int(row[1]), str(row[2]), int(row[3]), row[4]
        else:
            item = self._head(db, conversation_id, branch)  # a fresh fork: in its ancestors
            if item is None:
                return last, None
            head_seq, digest, turn = item.seq, item.hash, item.turn
            transcript = db.one("SELECT transcript FROM items WHERE conversation_id = ? AND "
                                "seq = ?", (conversation_id, head_seq))[0]
        if transcript is None:  # written before transcript hashes: fill them in first
            fill_conversation(db, conversation_id)
            transcript = db.one("SELECT transcript FROM items WHERE conversation_id = ? AND "
                                "seq = ?", (conversation_id, head_seq))[0]
        return last, (head_seq, digest, turn, str(transcript))

    def _head(self, db: Session, conversation_id: str, branch: str) -> Item | None:
        """The newest item on the branch or, for a fresh fork, on its ancestors."""
        for name, limit in self._lineage(db, conversation_id, branch):
            row = db.one(f"SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ? AND "
                         "branch = ? AND seq <= ? ORDER BY seq DESC LIMIT 1",
                         (conversation_id, name, limit))
            if row is not None:
                return item_from_row(row)
        return None

    def _lineage(self, db: Session, conversation_id: str, branch: str) -> Lineage:
        """The branch and its ancestors, each with the last seq it contributes. A branch never
        changes once created, so this is cached until the conversation is deleted."""
        key = (conversation_id, branch)
        cached = self._lineages.get(key) or db.new_lineages.get(key)
        if cached is not None:
            return cached
        parents = {r[0]: (r[1], r[2]) for r in db.all(
            "SELECT name, parent, fork_seq FROM branches WHERE conversation_id = ?",
            (conversation_id,))}
        if branch not in parents:
            if not parents:
                raise UnknownConversation(conversation_id)
            raise UnknownBranch(conversation_id, branch)
        lineage, name, limit = [], branch, _NO_LIMIT
        while name is not None:
            lineage.append((name, limit))
            parent, fork_seq = parents[name]
            name, limit = parent, fork_seq
        if db.writing:
            db.new_lineages[key] = lineage  # cached once the transaction commits
        else:
            with self._cache_lock:
                self._lineages[key] = lineage
        return lineage

    def history(self, conversation_id: str, branch: str = MAIN, *,
                through: Item | None = None) -> Sequence[Item]:
        """Read incrementally: items never change and seqs commit in order (a commit holds its
        conversation), so what this handle read before is still the branch's prefix and only
        items after it are fetched, from whichever replica wrote them. What was read before
        is shared with what is returned, not copied (``sequences.Chunked``). With
        ``through``, nothing is read when what this handle holds ends there (a turn's
        commits add their items to it): the branch up to that item never changes."""
        key = (conversation_id, branch)
        if through is not None:
            with self._cache_lock:
                known = self._histories.get(key)
            if known and known[-1].seq == through.seq and known[-1].hash == through.hash:
                return known
        items = self._read_history(key)
        return items if through is None else _up_to(items, through)

    def _read_history(self, key: tuple[str, str]) -> Chunked[Item]:
        conversation_id, branch = key
        with self._reading() as db:
            lineage = self._lineage(db, conversation_id, branch)
            with self._cache_lock:
                known = self._histories.get(key) or Chunked()
            after = known[-1].seq if known else 0
            where = " OR ".join("(i.branch = ? AND i.seq <= ?)" for _ in lineage)
            params: list[Any] = [after]
            for name, limit in lineage:
                params += [name, limit]
            # from the conversation's row, which comes along (for the turn's assembly): no row
            # at all when it was deleted (through another handle: the lineage is cached), its
            # row with nulls for an item's columns when nothing is new
            rows = db.all(f"SELECT {_OF_C}, {_ITEMS_OF_I} FROM conversations c LEFT JOIN "
                          f"items i ON i.conversation_id = c.id AND i.seq > ? AND ({where}) "
                          "WHERE c.id = ? ORDER BY i.seq", [*params, conversation_id])
        if not rows:
            self._forget(conversation_id)
            raise UnknownConversation(conversation_id)
        self._remember_conversation(tuple(rows[0][:_C]))
        if rows[0][_C + 1] is None:
            return known  # shared, immutable: a long history is not copied per read
        items = known.plus(item_from_row(row[_C:]) for row in rows)
        self._remember_history(key, items)
        return items

    def _appended(self, key: tuple[str, str], items: Sequence[Item]) -> None:
        """A commit's items follow what this handle read of their branch when it ended at
        their parent (the head the commit found): the next read need not fetch them."""
        with self._cache_lock:
            known = self._histories.get(key)
        if known and known[-1].seq == items[0].parent_seq:
            self._remember_history(key, known.plus(items))

    def _remember_history(self, key: tuple[str, str], items: Chunked[Item]) -> None:
        with self._cache_lock:
            previous = self._histories.pop(key, ())
            self._histories[key] = items
            self._history_items += len(items) - len(previous)
            while len(self._histories) > 1 and self._history_items > _REMEMBERED_ITEMS:
                _, evicted = self._histories.popitem(last=False)
                self._history_items -= len(evicted)

    def item(self, conversation_id: str, seq: int) -> Item:
        rows = [] if not 0 < seq < _NO_LIMIT else self._read(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ? AND seq = ?",
            (conversation_id, seq))
        if not rows:
            self.conversation(conversation_id)
            raise UnknownItem(conversation_id, seq)
        return item_from_row(rows[0])

    def find_client_message(self, client_msg_id: str) -> Item | None:
        rows = self._read(f"SELECT {ITEM_COLUMNS} FROM items WHERE client_msg_id = ?",
                          (client_msg_id,))
        return item_from_row(rows[0]) if rows else None


def _up_to(items: Chunked[Item], through: Item) -> Chunked[Item]:
    """``items`` as far as ``through``; all of them when it is not among them."""
    if items and items[-1].seq == through.seq:
        return items
    end = bisect_right(items, through.seq, key=lambda item: item.seq)
    if end and items[end - 1].seq == through.seq:
        return items.prefix(end)
    return items
