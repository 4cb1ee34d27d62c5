"""The trajectory monitor as a context provider, with the tool guard it lends the harness.

Each turn, before the message is written, the monitor reads the branch's whole trajectory
(``trajectory.py``), runs its detectors (rules and embeddings by default; a model classifier
as an option), and records one decision as a context item after the message: the risk, the
signals, the actions and the state carried on (``turn/monitoring.py`` reads it). Then:

- ``remind``: it asks the goal reminder (``providers/goal.py``, registered after it) to
  restate the goal and the policy in this turn's tail; the prefix never moves;
- ``restrict``: from this decision on, :meth:`TrajectoryMonitor.guard` (one of the tool
  harness's guards, ``ToolLimits.guards``) refuses every tool outside the safe set, in the
  harness and not in the prompt; the tail says which tools are left;
- ``refuse``: the turn is answered with a fixed refusal instead of the model (served, with a
  side call record of ``purpose="monitor"`` that says so, so the turn has a call like any);
- ``flag``: the decision says ``flagged``, and every later one keeps it (inspector, metrics).

It is also a turn hook (``turn/hooks.py``): where the model's reply refused, the monitor
reads the turn again with that reply (``rules.refused``: refusals the user has not explained)
and, where that raises the risk, records a second decision after the reply, which can flag
and restrict (the next turn starts from it). A reply that did not refuse costs nothing.

Nothing the monitor renders goes above the history: with it on, the cacheable prefix of every
request is what it would be without it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from threadline.calls import CallStatus, ModelCall, SentRequest, Timings, Usage
from threadline.items import Item, NewItem, new_id
from threadline.providers.goal import ask
from threadline.providers.monitor.policy import Decision, RiskPolicy
from threadline.providers.monitor.rules import RuleDetector, is_refusal, opens, refused
from threadline.providers.monitor.signals import Detector
from threadline.providers.monitor.trajectory import Trajectory
from threadline.request import TailBlock
from threadline.stores.base import Commit
from threadline.turn import monitoring
from threadline.turn.hooks import TurnEvent
from threadline.turn.providers import Gathering, Provider, Served, this_turn
from threadline.turn.tools import Tool

NAME = "trajectory monitor"
MODEL_ID = "threadline.monitor"  # the "model" of a refusal's call record
REFUSAL = ("I can't continue with this request. This conversation has been flagged for "
           "review; I can help with something else.")


class TrajectoryMonitor(Provider):
    uses_user = False  # as a turn hook

    def __init__(self, detectors: Sequence[Detector] | None = None, *,
                 policy: RiskPolicy | None = None, safe_tools: Sequence[str] | None = None,
                 refusal: str = REFUSAL, name: str = NAME) -> None:
        self.detectors = tuple(detectors) if detectors is not None else (RuleDetector(),)
        self.policy = policy or RiskPolicy()
        self.safe_tools = None if safe_tools is None else tuple(safe_tools)
        self.refusal, self.name = refusal, name

    # -- judging ------------------------------------------------------------------------

    def judge(self, trajectory: Trajectory) -> Decision:
        """The decision for the trajectory's new message, in the conversation."""
        started = time.perf_counter()
        signals = [s for d in self.detectors for s in d.signals(trajectory)]
        decision = self.policy.decide(signals, trajectory.previous, safe_tools=self.safe_tools,
                                      first=opens(trajectory))
        return replace(decision, detectors=tuple(d.name for d in self.detectors),
                       elapsed_ms=(time.perf_counter() - started) * 1000)

    def judge_alone(self, trajectory: Trajectory) -> Decision:
        """The decision a per-message check makes: the message with nothing before it."""
        return self.judge(trajectory.alone())

    # -- as a provider ------------------------------------------------------------------

    def gather(self, found: Gathering) -> NewItem | None:
        trajectory = Trajectory.read(found.history, found.text, _system(found),
                                     found.host.store)
        decision = self.judge(trajectory)
        if "remind" in decision.actions:
            ask(found, f"{self.name}: risk {decision.risk:.2f}")
        return self.context_item(**{monitoring.FIELD: decision.to_json()})

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        item = this_turn(self, history)
        found = None if item is None else monitoring.decision(item)
        if found is None or "restrict" not in found.get("actions", ()):
            return []
        safe = found.get("safe_tools")
        left = "those without side effects" if safe is None else ", ".join(safe) or "none"
        return [TailBlock(f"{self.name}: tools restricted",
                          f"For the rest of this conversation only these tools run: {left}.")]

    def serve(self, item: Item, found: Gathering) -> Served | None:
        decision = monitoring.decision(item)
        if decision is None or "refuse" not in decision.get("actions", ()):
            return None
        call = _refusal_call(found, item, decision.get("risk", 0.0))
        return Served(self.refusal, {"call_id": call.id, "refused_by": self.name,
                                     "risk": decision.get("risk")})

    # -- as a turn hook: the reply read ------------------------------------------------------

    def after_turn(self, event: TurnEvent) -> None:
        result = event.result
        if result is None or result.deduplicated or not is_refusal(result.reply.text):
            return
        history = event.store.history(event.conversation_id, event.branch)
        judged = next((d for i in reversed(history) if i.turn == result.turn
                       and (d := monitoring.decision(i)) is not None), None)
        if judged is None or judged.get("after_reply"):  # not judged, or judged again already
            return
        found = refused(Trajectory.read(history, "", None))  # it reads turns, not the scope
        decision = self.policy.after_reply(judged, found, safe_tools=self.safe_tools)
        if decision is None:
            return
        item = self.context_item(**{monitoring.FIELD: decision.to_json()})
        event.store.commit(Commit(conversation_id=event.conversation_id, branch=event.branch,
                                  created_at=result.reply.created_at, check_head=False,
                                  items=[item]))

    # -- as a tool guard (ToolLimits.guards) ----------------------------------------------

    def guard(self, tool: Tool, history: Sequence[Item]) -> str | None:
        """Why ``tool`` may not run where a restriction is in force (None: it may)."""
        restriction = monitoring.restriction(history)
        if restriction is None:
            return None
        safe = restriction.get("safe_tools")
        allowed = not tool.side_effect if safe is None else tool.name in safe
        if allowed:
            return None
        return (f"the {self.name} restricted this conversation's tools to a safe set "
                f"(risk {float(restriction.get('risk', 0)):.2f}); {tool.name!r} is not in it")


def _system(found: Gathering) -> str | None:
    cid = found.turn.conversation_id
    if cid is not None:
        return found.host.store.conversation(cid).system
    system = getattr(found.host, "system", None)
    return system if isinstance(system, str) else None


def _refusal_call(found: Gathering, item: Item, risk: float) -> ModelCall:
    """The record a refused turn's reply points to: no model was called, and it says so."""
    store, clock = found.host.store, found.host.clock
    call = ModelCall(
        id=new_id("call_"), conversation_id=item.conversation_id, branch=item.branch,
        turn=item.turn, head_seq=item.seq, reply_seq=None, status=CallStatus.OK,
        model=MODEL_ID, request=SentRequest(model=MODEL_ID, messages=()),
        response={"refused": True, "by": NAME, "risk": risk}, usage=Usage(),
        timings=Timings(ttft_ms=None, total_ms=0.0), started_at=clock(), purpose="monitor")
    recorded = store.commit(Commit(conversation_id=item.conversation_id, created_at=clock(),
                                   branch=item.branch, check_head=False, call=call)).call
    assert recorded is not None
    return recorded
