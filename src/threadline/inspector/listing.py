"""View 1, the conversations: a page of them, searched and sorted, with what each cost.

Search is by text (a title or a user or assistant message contains it), by title, and by user
(the owner); every search is case-insensitive for ASCII letters and a scan of the log
(``stores/browse.py``), fine for a person, not a program. A user token lists only its user's
conversations and may not name another user. The billed cost is each conversation's calls
billed as ``threadline cache report`` bills them, for the conversations on the page only.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from threadline.cache.report import reuse_of
from threadline.errors import InputError
from threadline.inspector.deps import Inspector
from threadline.server.access import Caller
from threadline.stores.base import ConversationSummary
from threadline.stores.browse import ConversationQuery

DEFAULT_PAGE = 25
MAX_PAGE = 100
MAX_SEARCH = 200  # characters: a search is a scan, and a person types less
SORTS = {"recent": False, "oldest": True}  # by last activity: newest first, or oldest


@dataclass(frozen=True)
class Row:
    summary: ConversationSummary
    cost_usd: float


@dataclass(frozen=True)
class Listing:
    rows: list[Row]
    query: ConversationQuery
    sort: str
    user: str | None        # the user filter as asked (None: every user the caller may see)
    has_next: bool

    def url(self, **changes: object) -> str:
        """This listing's address with ``changes`` (e.g. ``offset=50``)."""
        params: dict[str, object] = {"q": self.query.text, "title": self.query.title,
                                     "user": self.user, "sort": self.sort,
                                     "limit": self.query.limit, "offset": self.query.offset}
        params.update(changes)
        kept = {k: v for k, v in params.items()
                if v not in (None, "") and not (k == "offset" and v == 0)
                and not (k == "sort" and v == "recent")
                and not (k == "limit" and v == DEFAULT_PAGE)}
        return "?" + urlencode(kept) if kept else "?"

    @property
    def previous_offset(self) -> int | None:
        q = self.query
        return None if q.offset == 0 else max(q.offset - q.limit, 0)

    @property
    def next_offset(self) -> int | None:
        return self.query.offset + self.query.limit if self.has_next else None


def number(value: str | None, name: str, *, default: int, low: int, high: int) -> int:
    """A query parameter as a bounded integer, with a clear refusal."""
    if value is None or value == "":
        return default
    try:
        parsed = int(value)
    except ValueError:
        raise InputError(f"{name} must be a whole number, not {value!r}",
                         hint=f"use {name}={default}") from None
    if not low <= parsed <= high:
        raise InputError(f"{name} must be from {low:,} to {high:,}; {parsed:,} is not",
                         hint=f"use {name}={default}")
    return parsed


def search_text(value: str | None, name: str) -> str | None:
    text = (value or "").strip()
    if len(text) > MAX_SEARCH:
        raise InputError(f"the {name} search is {len(text):,} characters; at most "
                         f"{MAX_SEARCH} are searched", hint="search for a shorter phrase")
    return text or None


def listing(inspector: Inspector, caller: Caller, *, q: str | None = None,
            title: str | None = None, user: str | None = None, sort: str | None = None,
            limit: str | None = None, offset: str | None = None) -> Listing:
    """The page of conversations the query asks for, as ``caller`` may see them."""
    sort = sort or "recent"
    if sort not in SORTS:
        raise InputError(f"unknown sort {sort!r}; choose one of: {', '.join(SORTS)}")
    asked_user = search_text(user, "user")
    query = ConversationQuery(
        text=search_text(q, "text"), title=search_text(title, "title"),
        owner=caller.acting_for(asked_user, "user"), oldest_first=SORTS[sort],
        limit=number(limit, "limit", default=DEFAULT_PAGE, low=1, high=MAX_PAGE),
        offset=number(offset, "offset", default=0, low=0, high=10**9))
    found = inspector.browse.conversations(
        ConversationQuery(**{**query.__dict__, "limit": query.limit + 1}))
    pricing = inspector.pricing
    rows = [Row(s, sum(r.cost_usd for r in reuse_of(
        inspector.store.calls(s.conversation.id), pricing.profile, pricing.input_price)))
        for s in found[:query.limit]]
    return Listing(rows, query, sort, asked_user, has_next=len(found) > query.limit)
