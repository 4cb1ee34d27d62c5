"""Time in a recall query: what a question about *when* looks for, and the dates it names.

"When did Ann go to the support group?" is answered by a turn that says "I went yesterday":
the turn carries the date it was said, so a question about when favours turns that place
something in time (yesterday, last week, in May, a date). "What did Ann paint in July 2023?"
names a span: turns said during it (or in the weeks after, when it was still news) are
favoured. A span relative to the moment asked ("last year", "last month", "last week",
"yesterday") is read against ``at``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_MONTH = r"(" + "|".join(m[:3] + r"(?:" + m[3:] + r")?" for m in MONTHS) + r")\.?"
_YEAR = r"((?:19|20)\d\d)"

# a question about when something happened, how long ago, or in which year or month
_ASKS_WHEN = re.compile(r"^\W*when\b|\b(?:what|which) (?:year|month|day|date|time)\b|"
                        r"\bhow long (?:ago|has|have|had|did|was|were)\b|\bsince when\b",
                        re.IGNORECASE)
# words that place something in time, as people say them in a conversation
_PLACES_IN_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|ago|last|next|this (?:week|"
    r"weekend|month|year|morning|summer|winter|spring|fall|autumn)|weekend|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|" + "|".join(MONTHS) + r"|"
    r"(?:19|20)\d\d|since|years?|months?|weeks?|days?)\b", re.IGNORECASE)
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
_IN_MONTH = re.compile(rf"\b(?:in|during|this|last)\s+{_MONTH}(?!\s+\d)\b", re.IGNORECASE)
_IN_YEAR = re.compile(rf"\b(?:in|during|of|since)\s+{_YEAR}\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b(yesterday|last (?:week|weekend|month|year))\b", re.IGNORECASE)

# what was still news after its time: a turn said this long after a span ends still counts
NEWS_DAYS = 21


@dataclass(frozen=True)
class Span:
    """A span of time a query names: [start, end); ``month`` alone: that month of any
    year ("in June", with no year said)."""

    start: datetime | None = None
    end: datetime | None = None
    month: int | None = None

    def holds(self, moment: datetime, *, slack_days: int = NEWS_DAYS) -> bool:
        """Whether something said at ``moment`` was said during the span or soon after."""
        if self.month is not None:
            late = moment - timedelta(days=slack_days)
            return self.month in (moment.month, late.month)
        assert self.start is not None and self.end is not None
        return self.start <= moment < self.end + timedelta(days=slack_days)


@dataclass(frozen=True)
class TimeQuery:
    asks_when: bool
    span: Span | None

    @property
    def timed(self) -> bool:
        return self.asks_when or self.span is not None


def time_query(query: str, at: datetime) -> TimeQuery:
    """What ``query`` asks about time, read against the moment asked, ``at``."""
    return TimeQuery(bool(_ASKS_WHEN.search(query)), span_of(query, at))


def places_in_time(text: str) -> bool:
    """Whether ``text`` says when something happened (yesterday, last week, in May, …)."""
    return _PLACES_IN_TIME.search(text) is not None


def span_of(query: str, at: datetime) -> Span | None:
    """The span of time ``query`` names, most precise first, or None."""
    def month(name: str) -> int:
        return next(n for n, m in enumerate(MONTHS, start=1) if m.startswith(name[:3].lower()))

    def day_span(year: int, month_number: int, day: int) -> Span | None:
        try:
            start = at.replace(year=year, month=month_number, day=day, hour=0, minute=0,
                               second=0, microsecond=0)
        except ValueError:
            return None
        return Span(start, start + timedelta(days=1))

    if found := _DAY_MONTH_YEAR.search(query):
        return day_span(int(found[3]), month(found[2]), int(found[1]))
    if found := _MONTH_DAY_YEAR.search(query):
        return day_span(int(found[3]), month(found[1]), int(found[2]))
    if found := _MONTH_YEAR.search(query):
        return _month_span(at, int(found[2]), month(found[1]))
    if found := _RELATIVE.search(query):
        return _relative(found[1].casefold(), at)
    if found := _IN_MONTH.search(query):
        return Span(month=month(found[1]))
    if found := _IN_YEAR.search(query):
        start = at.replace(year=int(found[1]), month=1, day=1, hour=0, minute=0, second=0,
                           microsecond=0)
        return Span(start, start.replace(year=start.year + 1))
    return None


def _month_span(at: datetime, year: int, month_number: int) -> Span:
    start = at.replace(year=year, month=month_number, day=1, hour=0, minute=0, second=0,
                       microsecond=0)
    return Span(start, start.replace(year=year + (month_number == 12),
                                     month=month_number % 12 + 1))


def _relative(phrase: str, at: datetime) -> Span:
    today = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if phrase == "yesterday":
        return Span(today - timedelta(days=1), today)
    if phrase in ("last week", "last weekend"):
        monday = today - timedelta(days=today.weekday())
        return Span(monday - timedelta(days=7), monday)
    if phrase == "last month":
        first = today.replace(day=1)
        previous = (first - timedelta(days=1)).replace(day=1)
        return Span(previous, first)
    start = today.replace(year=today.year - 1, month=1, day=1)  # last year
    return Span(start, start.replace(year=today.year))
