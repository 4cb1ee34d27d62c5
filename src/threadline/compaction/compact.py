"""Planning a compaction against the real request, and applying it as one log event.

Each planner proposes a change (tool results to clear, a cut, a summary); the proposal is
measured exactly by assembling the request the next call would send with the compaction item
appended, and priced against carrying on. Standing constraints are recorded before anything is
planned, so the compaction pins every one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from threadline.compaction.clear_tools import clearable
from threadline.compaction.constraints import Detector, active, detect, undetected
from threadline.compaction.extract import ExtractionFailed
from threadline.compaction.plan import (
    Count,
    Plan,
    Policy,
    price,
    request_tokens,
)
from threadline.compaction.summarize import summarize
from threadline.compaction.view import STRATEGIES, context_view
from threadline.compaction.window import cut_for
from threadline.errors import InputError
from threadline.items import CONTROL_KINDS, Item, ItemKind, NewItem, next_item
from threadline.request import Request
from threadline.stores.base import Commit, Store

AssembleFor = Callable[[Sequence[Item]], Request]  # the engine's assembly for this branch


@dataclass(frozen=True)
class Compacted:
    plan: Plan | None
    applied: Item | None                 # the compaction item, when one was appended
    constraints: tuple[Item, ...] = ()   # constraints recorded before planning
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"applied": self.applied is not None,
                "compaction_seq": None if self.applied is None else self.applied.seq,
                "plan": None if self.plan is None else self.plan.to_json(),
                "constraints_recorded": [c.seq for c in self.constraints],
                "detail": self.detail}


def measure(history: Sequence[Item], assemble_for: AssembleFor, count: Count) -> int:
    return sum(tokens for _, tokens in request_tokens(assemble_for(history), count))


def plan(history: Sequence[Item], assemble_for: AssembleFor, count: Count, policy: Policy, *,
         reason: str, budget: int | None = None, strategy: str | None = None,
         through: int | None = None) -> Plan | None:
    """The lightest compaction that brings the next request to ``budget`` tokens (default: the
    low-water mark), or the one that comes closest; None when nothing can be compacted.
    ``through`` fixes where the turns that leave end (a task boundary) instead of the water
    marks, and makes a summary the strategy."""
    if strategy is not None and strategy not in STRATEGIES:
        raise InputError(f"unknown compaction strategy {strategy!r}; choose from "
                         f"{', '.join(STRATEGIES)}")
    target = policy.low_water if budget is None else budget
    if target < 1:
        raise InputError("the token budget must be at least 1")
    view = context_view(history)
    request = assemble_for(history)
    measured = request_tokens(request, count)
    before = sum(tokens for _, tokens in measured)
    by_seq: dict[int, int] = {}
    for message, tokens in measured:
        if message.seq is not None:
            by_seq[message.seq] = by_seq.get(message.seq, 0) + tokens
    pinned = tuple(c.seq for c in active(history))
    candidates: list[Plan] = []

    def consider(proposal: Plan) -> Plan:
        done = _evaluate(proposal, history, assemble_for, count, request, before, policy)
        candidates.append(done)
        return done

    base = Plan(strategy="pin", reason=reason, tokens_before=before, tokens_after=before,
                kept_prefix=before, price=price(before=before, after=before, kept_prefix=before,
                                                policy=policy), pinned=pinned)
    if strategy in (None, "clear_tool_results"):
        seqs = clearable(view, keep=policy.keep_tool_results, exclude=policy.exclude_tools)
        if seqs:
            cleared = consider(replace(base, strategy="clear_tool_results", cleared=tuple(seqs)))
            if strategy is None and cleared.saved < policy.clear_at_least:
                candidates.remove(cleared)  # not worth a reset on its own
            elif cleared.tokens_after <= target:
                return cleared
    cut = cut_for(view, by_seq, over=before - target, keep=policy.keep_turns)
    if through is not None:
        cut = max((i.seq for i in view.items if i.seq <= through), default=None)
        strategy = strategy or "summary"
    if cut is not None and strategy in (None, "summary") and (policy.summarize or strategy):
        leaving = [i for i in view.items if i.seq <= cut]
        previous = None if view.summary is None else view.summary.content["summary"]
        staying = before - sum(by_seq.get(i.seq, 0) for i in leaving)
        text = summarize(leaving, previous, limit=max(target // 2, target - staying),
                         count=count)
        summary = consider(replace(base, strategy="summary", through_seq=cut, summary=text))
        if strategy is None and summary.saved > 0:
            strategy = "summary"  # recall first: a summary that saves room always wins
    bare = strategy == "window" or (strategy is None and (
        not policy.summarize or reason == "context_limit"))  # the last resort at the limit
    if cut is not None and bare:
        consider(replace(base, strategy="window", through_seq=cut))
    if strategy == "pin":
        return consider(base)
    candidates = [c for c in candidates if c.saved > 0]  # a reset must buy room
    if not candidates:
        return None
    reaching = [c for c in candidates if c.tokens_after <= target]
    return reaching[0] if reaching else min(candidates, key=lambda c: c.tokens_after)


def _evaluate(proposal: Plan, history: Sequence[Item], assemble_for: AssembleFor,
              count: Count, request: Request, before: int, policy: Policy) -> Plan:
    """The proposal measured exactly: the request as it would be with the compaction item."""
    after_request = assemble_for([*history, next_item(history, proposal.to_item())])
    measured = request_tokens(after_request, count)
    after = sum(tokens for _, tokens in measured)
    old = [m.to_openai() for m in request.messages]
    start = 1 if after_request.tools else 0  # the tools never change in a compaction
    kept = sum(tokens for _, tokens in measured[:start])
    for index, (message, tokens) in enumerate(measured[start:]):
        if index >= len(old) or message.to_openai() != old[index]:
            break
        kept += tokens
    return replace(proposal, tokens_after=after, kept_prefix=kept,
                   price=price(before=before, after=after, kept_prefix=kept, policy=policy))


def _hypothetical(new: Sequence[NewItem], history: Sequence[Item]) -> list[Item]:
    out: list[Item] = []
    for item in new:
        out.append(next_item([*history, *out], item))
    return out


def compact(store: Store, conversation_id: str, branch: str, *, assemble_for: AssembleFor,
            count: Count, policy: Policy, clock: Callable[[], datetime], reason: str = "manual",
            budget: int | None = None, strategy: str | None = None, dry_run: bool = False,
            boundary: bool = False, through: int | None = None,
            decide: Callable[[Plan], bool] | None = None,
            extract: Callable[[Sequence[Item]], Sequence[NewItem]] | None = None,
            detector: Detector = detect) -> Compacted:
    """Plan, and unless ``dry_run`` or ``decide`` (the trigger policy's verdict on the plan)
    says no: find the standing constraints (with ``detector``, by default the rules; with
    ``extract`` by a model too),
    record them, and append the compaction that pins them. ``boundary`` says a task just
    ended: everything up to the last completed turn is summarised."""
    history = store.history(conversation_id, branch)
    if not history:
        return Compacted(None, None, detail="the branch is empty; there is nothing to compact")
    if boundary:
        waiting = unanswered(history)
        done = [i for i in history if waiting is None or i.seq < waiting.seq]
        through, reason = (done[-1].seq if done else 0), "task_boundary"

    def plan_with(found: Sequence[NewItem]) -> Plan | None:  # found measured as if recorded
        return plan([*history, *_hypothetical(found, history)], assemble_for, count, policy,
                    reason=reason, budget=budget, strategy=strategy, through=through)

    found = undetected(history, detector)
    chosen = plan_with(found)
    if chosen is None:
        return Compacted(None, None, detail="nothing in the view can be compacted")
    if dry_run:
        return Compacted(chosen, None, detail="dry run: nothing was changed")
    if decide is not None and not decide(chosen):
        return Compacted(chosen, None, detail="not applied: it does not pay for itself over "
                         f"{chosen.price.horizon_turns} turns")
    if extract is not None:
        try:  # a model looks for rules too; if it fails, nothing is compacted
            known = {(f.content["from_seq"], f.content["text"]) for f in found}
            found += [n for n in extract([*history, *_hypothetical(found, history)])
                      if (n.content["from_seq"], n.content["text"]) not in known]
        except ExtractionFailed as err:
            note = NewItem.note(f"compaction skipped: {err.message}", failure="extraction",
                                reason=reason)
            store.commit(Commit(conversation_id=conversation_id, branch=branch,
                                created_at=clock(), check_head=False, items=[note]))
            return Compacted(None, None, detail=f"not compacted: {err.message}")
    recorded: tuple[Item, ...] = ()
    if found:
        recorded = tuple(store.commit(Commit(conversation_id=conversation_id, branch=branch,
                                             created_at=clock(), check_head=False,
                                             items=found)).items)
        history = store.history(conversation_id, branch)
        chosen = plan_with(())
        if chosen is None:  # cannot happen: recording constraints only adds to the view
            return Compacted(None, None, recorded, "nothing in the view can be compacted")
    result = store.commit(Commit(conversation_id=conversation_id, branch=branch,
                                 created_at=clock(), expected_head=history[-1].seq,
                                 items=[chosen.to_item()]))
    return Compacted(chosen, result.items[0], recorded,
                     f"{chosen.strategy}: {chosen.tokens_before} → {chosen.tokens_after} tokens")


def unanswered(history: Sequence[Item]) -> Item | None:
    """The branch's newest message if it is a user message still waiting for its answer."""
    for item in reversed(history):
        if item.kind not in CONTROL_KINDS:
            return item if item.kind is ItemKind.USER else None
    return None
