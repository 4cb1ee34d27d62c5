"""A model-based classifier, on any backend: the option beside the rules and embeddings.

The model is shown the policy's categories and the recent user messages, and asked for one
number from 0 (nothing the policy forbids) to 10 (plainly after it). Each call is recorded as
a side call (``purpose="monitor"``) on the conversation, like the constraint extractor's; on
a conversation's first message there is nothing to record it against, and a single message
is the rules' job, so the classifier starts on the second. A failed or unreadable answer is a
signal of 0 with the reason, never a failed turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from threadline.items import utc_now
from threadline.models.base import ModelBackend
from threadline.models.calling import call_model, call_record
from threadline.providers.monitor.rules import WINDOW, Policy
from threadline.providers.monitor.signals import Signal
from threadline.providers.monitor.trajectory import Trajectory
from threadline.request import Message, Request, Segment, SegmentKind, Stability
from threadline.stores.base import Commit

PROMPT = ("You review conversations for a safety policy. It forbids helping with: {topics}. "
          "Read the user's messages below together, as one request, and answer with a single "
          "number from 0 (nothing the policy forbids) to 10 (plainly seeking it). Answer with "
          "the number only.")
_NUMBER = re.compile(r"\b(10|[0-9])\b")


class ModelClassifier:
    name = "classifier"

    def __init__(self, model: ModelBackend, *, window: int = WINDOW,
                 policy: Policy | None = None,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.model, self.window = model, window
        self.policy, self.clock = policy or Policy.default(), clock

    def request(self, trajectory: Trajectory) -> Request:
        topics = ", ".join(c.name for c in self.policy.categories)
        listing = "\n\n".join(f"[user message {n}]\n{text}" for n, text in
                              enumerate(trajectory.recent_users(self.window), 1))
        return Request(tools=(), segments=(
            Segment(SegmentKind.SYSTEM, Stability.DEPLOY,
                    (Message("system", PROMPT.format(topics=topics)),), cache_point=True),
            Segment(SegmentKind.CURRENT, Stability.TURN, (Message("user", listing),))))

    def signals(self, trajectory: Trajectory) -> list[Signal]:
        head, store = trajectory.head, trajectory.store
        if head is None or store is None:
            return [Signal("classifier", 0.0, "not run on a conversation's first message")]
        request = self.request(trajectory)
        outcome = call_model(self.model, request, clock=self.clock)
        text = outcome.completion.text if outcome.completion is not None else ""
        found = _NUMBER.search(text)
        error = None if found or outcome.error else f"unreadable answer: {text[:80]!r}"
        record = call_record(head=head, branch=head.branch, request=request, outcome=outcome,
                             model_id=self.model.model_id, error=error)
        call = store.commit(Commit(conversation_id=head.conversation_id,
                                   created_at=self.clock(), branch=head.branch,
                                   check_head=False, call=replace(record, purpose="monitor")
                                   )).call
        call_id = "" if call is None else call.id
        if found is None:
            return [Signal("classifier", 0.0, f"{error or outcome.error} (call {call_id})")]
        return [Signal("classifier", int(found.group(1)) / 10,
                       f"the model answered {found.group(1)}/10 (call {call_id})")]
