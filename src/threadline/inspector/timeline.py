"""View 2's timeline: one page of a branch's turns, each with what its calls were shown.

A page is whole turns, found by walking the branch from a cursor (an item's seq) through the
log's index (``Store.browse``): the newest page by default, then older ones (``before``) or
newer ones (``after``). A page costs its own turns, whatever the branch's length.

Each turn's bar splits the prompt tokens of its model calls (side calls aside) three ways:

    reused        the tokens the provider served from its cache (the calls' cached_tokens)
    uncached tail tokens the previous request had too, sent again and not served from cache
                  (past where the request diverged, or past what the cache kept)
    new           tokens the previous request did not have (the prefix report's
                  previous_tokens, or its bytes scaled to tokens where no token ids were kept)

with the turn's TTFT (its first call's), its billed cost (every call of the turn, priced as
``threadline cache report`` prices them) and the miss cause where a call did not simply extend
the one before (``cache/attribution.py``). A compaction event on the page is marked with its
strategy, the tokens before and after, and the constraints it pinned, verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from threadline.cache.prefix import Cause, PrefixReport
from threadline.cache.report import reuse_of
from threadline.calls import ModelCall
from threadline.inspector.deps import Inspector
from threadline.items import Item, ItemKind
from threadline.stores.browse import UNBOUNDED, Lineage
from threadline.turn import monitoring

DEFAULT_TURNS = 20
MAX_TURNS = 100
_SHOWN = 600  # characters of a message shown on the timeline (the call page shows it whole)


@dataclass(frozen=True)
class Bar:
    prompt: int
    reused: int
    uncached: int
    new: int

    def share(self, part: int) -> float:
        """``part`` as a percentage of the prompt, for a CSS width."""
        return 0.0 if not self.prompt else round(100 * part / self.prompt, 3)


@dataclass(frozen=True)
class Miss:
    cause: str
    detail: str
    expected: bool
    call_id: str


@dataclass(frozen=True)
class CompactionMark:
    seq: int
    strategy: str
    reason: str
    tokens_before: int | None
    tokens_after: int | None
    constraints: tuple[str, ...]  # pinned, verbatim
    summary: str | None
    through_seq: int | None
    cleared: int


@dataclass
class Turn:
    number: int
    items: list[Item] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)
    bar: Bar | None = None
    ttft_ms: float | None = None
    cost_usd: float = 0.0
    misses: list[Miss] = field(default_factory=list)
    compactions: list[CompactionMark] = field(default_factory=list)

    @property
    def user(self) -> Item | None:
        return next((i for i in self.items if i.kind is ItemKind.USER), None)

    @property
    def replies(self) -> list[Item]:
        return [i for i in self.items if i.kind is ItemKind.ASSISTANT]

    @property
    def others(self) -> list[Item]:
        """What else the turn recorded: tool calls and results, context, notes."""
        return [i for i in self.items if i.kind not in (ItemKind.USER, ItemKind.ASSISTANT,
                                                        ItemKind.COMPACTION)]


@dataclass(frozen=True)
class Page:
    turns: list[Turn]    # oldest first
    older: int | None    # the cursor of the page before it (``before=``), if there is one
    newer: int | None    # the cursor of the page after it (``after=``), if there is one
    size: int


def shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


def page(inspector: Inspector, conversation_id: str, lineage: Lineage, *,
         before: int | None = None, after: int | None = None,
         size: int = DEFAULT_TURNS) -> Page:
    """The page of ``size`` turns before ``before`` (default: the newest), or after
    ``after``."""
    forward = after is not None
    groups, more = _walk(inspector, conversation_id, lineage, before, after, size)
    turns = sorted(groups.values(), key=lambda t: t.number)
    for turn in turns:
        turn.items.sort(key=lambda i: i.seq)
    seqs = [i.seq for t in turns for i in t.items]
    low, high = (min(seqs), max(seqs)) if seqs else (None, None)
    if forward:
        older = low if after and low is not None else None
        newer = high if more else None
    else:
        older = low if more else None
        newer = high if before is not None and high is not None else None
    _attach_calls(inspector, conversation_id, lineage, turns)
    return Page(turns, older, newer, size)


def _walk(inspector: Inspector, conversation_id: str, lineage: Lineage, before: int | None,
          after: int | None, size: int) -> tuple[dict[int, Turn], bool]:
    """Whole turns from the cursor, until ``size`` turns; and whether any lie beyond."""
    browse = inspector.browse
    chunk = 4 * size + 8
    groups: dict[int, Turn] = {}
    cursor = after if after is not None else (UNBOUNDED if before is None else before)
    while True:
        if after is not None:
            items = browse.items_after(conversation_id, lineage, cursor, chunk)
        else:
            items = browse.items_before(conversation_id, lineage, cursor, chunk)
        for item in items:
            if item.turn not in groups:
                if len(groups) == size:
                    return groups, True
                groups[item.turn] = Turn(item.turn)
            groups[item.turn].items.append(item)
        if len(items) < chunk:
            return groups, False
        cursor = items[-1].seq


def _attach_calls(inspector: Inspector, conversation_id: str, lineage: Lineage,
                  turns: Sequence[Turn]) -> None:
    if not turns:
        return
    first, last = turns[0].number, turns[-1].number
    limits = dict(lineage)
    by_turn = {t.number: t for t in turns}
    on_page = {i.branch for t in turns for i in t.items}
    calls: list[ModelCall] = []
    for name in (n for n, _ in lineage if n in on_page):
        limit = limits[name]
        # walk the branch's calls from the end the page is nearer
        head = inspector.store.head(conversation_id, name)
        from_newest = head is not None and head.turn - last <= first
        for call in inspector.browse.calls_in_turns(conversation_id, name, first, last,
                                                    from_newest=from_newest):
            if _in_lineage(call, limit):
                calls.append(call)
    pricing = inspector.pricing
    for row in reuse_of(calls, pricing.profile, pricing.input_price):
        turn = by_turn.get(row.call.turn)
        if turn is not None:
            turn.calls.append(row.call)
            turn.cost_usd += row.cost_usd
    for turn in turns:
        _summarise(turn)
        turn.compactions = [_mark(inspector, conversation_id, i) for i in turn.items
                            if i.kind is ItemKind.COMPACTION]


def _in_lineage(call: ModelCall, limit: int) -> bool:
    """A call recorded on an ancestor belongs to this branch's past only if it was made
    before the fork point: its reply (or, for a call with none, what it was shown) is at or
    before it."""
    if limit == UNBOUNDED:
        return True
    return call.reply_seq <= limit if call.reply_seq is not None else call.head_seq < limit


def _summarise(turn: Turn) -> None:
    own = [c for c in turn.calls if c.purpose == "turn"]
    if not own:
        return
    turn.ttft_ms = own[0].timings.ttft_ms
    parts = [split(c) for c in own]
    turn.bar = Bar(*(sum(p[i] for p in parts) for i in range(4)))
    for call in own:
        if call.prefix is None:
            continue
        report = PrefixReport.from_json(call.prefix)
        if report.cause not in (Cause.APPEND_ONLY, Cause.FIRST_CALL):
            turn.misses.append(Miss(str(report.cause), report.detail, report.expected,
                                    call.id))


def split(call: ModelCall) -> tuple[int, int, int, int]:
    """(prompt, reused, uncached tail, new) tokens of one call, as the module says."""
    prompt = max(call.usage.prompt_tokens, 0)
    reused = min(max(call.usage.cached_tokens, 0), prompt)
    previous = 0
    if call.prefix is not None:
        report = PrefixReport.from_json(call.prefix)
        if report.previous_tokens is not None:
            previous = report.previous_tokens
        elif report.prompt_bytes:
            previous = round(prompt * report.previous_bytes / report.prompt_bytes)
    repeated = max(min(previous, prompt), reused)
    new = prompt - repeated
    return prompt, reused, repeated - reused, new


def _mark(inspector: Inspector, conversation_id: str, item: Item) -> CompactionMark:
    content = item.content
    estimate = content.get("estimate") or {}
    pinned = []
    for seq in content.get("pinned", ()):
        constraint = inspector.store.item(conversation_id, int(seq))
        if constraint.kind is ItemKind.CONSTRAINT:
            pinned.append(str(constraint.content["text"]))
    return CompactionMark(
        seq=item.seq, strategy=str(content["strategy"]), reason=str(content.get("reason", "")),
        tokens_before=estimate.get("tokens_before"), tokens_after=estimate.get("tokens_after"),
        constraints=tuple(pinned), summary=content.get("summary"),
        through_seq=content.get("through_seq"), cleared=len(content.get("cleared", ())))


def describe(item: Item) -> str:
    """One line for an item that is not a message, as the timeline shows it."""
    c = item.content
    kind = item.kind
    if kind is ItemKind.TOOL_CALL:
        return shown(f"{c['name']}({', '.join(f'{k}={v!r}' for k, v in c['arguments'].items())})")
    if kind is ItemKind.TOOL_RESULT:
        return shown(str(c["output"]))
    if kind is ItemKind.RETRIEVAL:
        return shown(f"query {c['query']!r} (asked: {c['raw']!r}): {len(c['passages'])} passages")
    if kind is ItemKind.RECALL:
        return f"{len(c['memories'])} memories for {c['query']!r}"
    if kind in (ItemKind.CONSTRAINT, ItemKind.NOTE):
        return shown(str(c["text"]))
    if kind is ItemKind.CONSTRAINT_REMOVED:
        return f"constraint #{c['constraint_seq']} withdrawn"
    if kind is ItemKind.WORKING_STATE:
        return "the working state changed"
    if kind is ItemKind.CONTEXT:
        found = monitoring.decision(item)
        if found is not None:
            flag = "flagged for review; " if found.get("flagged") else ""
            return f"{c['provider']}: {flag}{monitoring.describe(found)}"
        return f"from {c['provider']}"
    return str(kind)
