"""Compaction plugged into an engine: on its own before a call, or when asked.

Before each model call (``before_call``, the engine's compactor seam) the request about to be
sent is measured; past the policy's context limit, at a task boundary past the low-water mark,
or past the high-water mark, the lightest compaction that reaches the low-water mark is planned
and applied if it pays for itself (a context-limit compaction always is). ``compact`` does the
same when asked, with a budget or strategy of the caller's choosing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from threadline.compaction.boundary import starts_new_task
from threadline.compaction.compact import Compacted, compact, unanswered
from threadline.compaction.constraints import Detector, detect
from threadline.compaction.extract import extract
from threadline.compaction.plan import Policy, request_tokens
from threadline.items import Item, NewItem
from threadline.plugin import Host
from threadline.request import Request
from threadline.stores.base import MAIN

Extract = Callable[[Sequence[Item]], Sequence[NewItem]]


class Compaction:
    """``policy`` says when to compact on its own (None: only when asked); ``detector`` finds
    the standing constraints before a compaction (the rules by default; the embedding
    classifier with ``standard.constraint_detector``), and with ``model_extraction`` the
    engine's model looks for them too."""

    def __init__(self, policy: Policy | None = None, *, model_extraction: bool = False,
                 detector: Detector = detect) -> None:
        self.policy, self.model_extraction = policy, model_extraction
        self.detector = detector

    def compact(self, host: Host, conversation_id: str, branch: str = MAIN, *,
                budget: int | None = None, strategy: str | None = None, dry_run: bool = False,
                boundary: bool = False) -> Compacted:
        """Compact a branch now (the lightest strategy that reaches ``budget`` tokens), or with
        ``dry_run`` only say what that would do and cost. ``boundary``: a task just ended, so
        summarise everything up to the last completed turn."""
        return compact(host.store, conversation_id, branch,
                       assemble_for=host.assembler(conversation_id, branch), count=host.count,
                       policy=self.policy or Policy(), clock=host.clock, reason="manual",
                       budget=budget, strategy=strategy, dry_run=dry_run, boundary=boundary,
                       extract=self._extractor(host, branch), detector=self.detector)

    def before_call(self, host: Host, head: Item, branch: str) -> tuple[Item, Request | None]:
        policy = self.policy
        if policy is None:
            return head, None
        assemble_for = host.assembler(head.conversation_id, branch)
        history = host.store.history(head.conversation_id, branch)
        request = assemble_for(history)
        tokens = sum(n for _, n in request_tokens(request, host.count))
        limit, message, through = policy.hard_limit, unanswered(history), None
        if limit is not None and tokens > limit:
            reason = "context_limit"
        elif message is not None and tokens > policy.low_water \
                and starts_new_task(message.content["text"]):
            reason, through = "task_boundary", message.seq - 1  # the finished task leaves
        elif tokens > policy.high_water:
            reason = "high_water"
        else:
            return head, request  # the common case: the measured request is the one to send
        done = compact(host.store, head.conversation_id, branch, assemble_for=assemble_for,
                       count=host.count, policy=policy, clock=host.clock, reason=reason,
                       through=through, extract=self._extractor(host, branch),
                       detector=self.detector,
                       decide=lambda plan: reason == "context_limit" or plan.price.pays_off)
        if done.applied is not None:
            return done.applied, None
        return host.store.head(head.conversation_id, branch) or head, None

    def _extractor(self, host: Host, branch: str) -> Extract | None:
        if not self.model_extraction:
            return None

        def run(history: Sequence[Item]) -> Sequence[NewItem]:
            with host.model_lock:
                return extract(host.store, host.model, history, branch,
                               clock=host.clock).proposals
        return run
