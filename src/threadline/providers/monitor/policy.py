"""From signals to a decision: the conversation's risk, and the actions it maps to.

A turn's risk is a noisy-or of its weighted signals (each kind counted once, at its
strongest); ``drift`` only amplifies the strongest other signal, since a conversation that
wanders is not a risk by itself, and by default not even that (``drift_weight``). The
conversation's risk is the larger of the turn's and what is left of the last turn's
(``decay``): one innocent message does not wipe a climb.

The risk maps to actions at thresholds (tuned on the dev scripts; docs/safety.md):

    note      ≥ 0.30  the decision is recorded (every decision is; this one says "watch")
    remind    ≥ 0.45  the goal and the system prompt's policy restated in the tail
    flag      ≥ 0.60  flagged for review (once: the state keeps it)
    restrict  ≥ 0.60  tools limited to a safe set for the rest of the conversation
    refuse    ≥ 0.85  the turn is answered with a refusal instead of the model's reply

An application can raise or lower any threshold, or turn an action off (None).

**A message that opens a request is not yet a conversation** (``first_cap``). On a
conversation's first message, and on one that answers a refusal with an account or a
narrowed request (``rules.opens``), the intent classifier's reading counts at most
``first_cap`` (default nothing) unless another signal of the turn corroborates it
(``CORROBORATE``; for ``harm``, the rules' subject with method or intent): a professional's
blunt opening reads as forbidden as an attacker's, and what tells them apart is what
follows. The reading is **held** in the decision's state (``held``) and counts, at its
decay, on the first later turn that corroborates it with a conversation-level signal
(pressing on after a refusal, a recast, building on the model's output, a decomposition);
a user who explains or goes on to something else lets it decay away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import InputError
from threadline.providers.monitor.signals import Signal, clip
from threadline.turn.monitoring import ACTIONS

# signals that read the conversation (or, for ``harm``, subject with method or intent in the
# rules) and so corroborate a single message's intent reading: the least score that does
CORROBORATE = {"harm": 0.6, "decomposition": 0.01, "escalation": 0.01, "reframing": 0.01,
               "persistence": 0.01, "classifier": 0.6}
HELD = "intent"  # the signal a first message's reading is held back from

WEIGHTS = {"harm": 1.0, "decomposition": 1.0, "escalation": 1.0, "reframing": 1.0,
           "semantic": 0.7, "intent": 1.0, "persistence": 1.0, "classifier": 1.0,
           "refused": 1.0}
# what a decision made after the turn's reply can still do: the reply is given, so there is
# nothing left to remind or refuse in this turn
AFTER_REPLY = ("note", "restrict", "flag")


@dataclass(frozen=True)
class RiskPolicy:
    weights: Mapping[str, float] = field(default_factory=lambda: dict(WEIGHTS))
    # how much drift adds, times the strongest other signal: nothing by default, since
    # benign conversations drift from their start as far as attacks do (it raised false
    # alarms on the tuning splits and caught nothing more: docs/safety.md)
    drift_weight: float = 0.0
    decay: float = 0.8          # the share of the last turn's risk a turn starts from
    note: float | None = 0.30
    remind: float | None = 0.45
    flag: float | None = 0.60
    restrict: float | None = 0.60
    refuse: float | None = 0.85
    # the most a first message's intent reading counts uncorroborated (None: all of it)
    first_cap: float | None = 0.0

    def __post_init__(self) -> None:
        for action in ACTIONS:
            value = getattr(self, action)
            if value is not None and not 0 < value <= 1:
                raise InputError(f"the monitor's {action} threshold must be in (0, 1] or "
                                 f"None (off); got {value!r}")
        if not 0 <= self.decay < 1:
            raise InputError(f"the monitor's risk decay must be in [0, 1); got {self.decay!r}")
        if self.first_cap is not None and not 0 <= self.first_cap <= 1:
            raise InputError(f"the monitor's first-message cap must be in [0, 1] or None; got "
                             f"{self.first_cap!r}")

    def hold(self, signals: Sequence[Signal], previous: Mapping[str, Any] | None, *,
             first: bool) -> tuple[list[Signal], float]:
        """The signals that count this turn, and the reading held back after it: a message
        that opens a request (``first``) has its uncorroborated intent above ``first_cap``
        held, and a held reading counts (at its decay) on the first later turn that a
        ``CORROBORATE`` signal corroborates."""
        out = list(signals)
        if self.first_cap is None:
            return out, 0.0
        held = self.decay * float((previous or {}).get("held", 0.0))
        corroborated = any(s.score >= CORROBORATE[s.name] for s in out if s.name in CORROBORATE)
        reading = max((s.score for s in out if s.name == HELD), default=0.0)
        if first and not corroborated and reading > self.first_cap:
            return [Signal(s.name, min(s.score, self.first_cap),
                           f"{s.detail}; opening the request alone, held back: {s.score:.2f}")
                    if s.name == HELD else s for s in out], max(held, reading)
        if held > 0 and corroborated:
            out.append(Signal(HELD, held, "held back earlier, corroborated now"))
            return out, 0.0
        return out, held if held >= 0.05 else 0.0

    def turn_risk(self, signals: Sequence[Signal]) -> float:
        strongest: dict[str, float] = {}
        for s in signals:
            strongest[s.name] = max(strongest.get(s.name, 0.0), s.score)
        keep = 1.0
        top = 0.0
        for name, score in strongest.items():
            if name == "drift":
                continue
            weighted = clip(self.weights.get(name, 1.0) * score)
            keep *= 1 - weighted
            top = max(top, weighted)
        return clip(1 - keep + self.drift_weight * strongest.get("drift", 0.0) * top)

    def decide(self, signals: Sequence[Signal], previous: Mapping[str, Any] | None, *,
               safe_tools: Sequence[str] | None, first: bool | None = None) -> Decision:
        """``first``: whether the message opens a request (``rules.opens``: the
        conversation's first, or an account or a narrowed request answering a refusal);
        None: where there is no earlier decision."""
        signals, held = self.hold(signals, previous,
                                  first=previous is None if first is None else first)
        turn = self.turn_risk(signals)
        carried = self.decay * float(previous.get("risk", 0.0)) if previous else 0.0
        return self._decision(max(turn, carried), turn, signals, previous, ACTIONS,
                              safe_tools=safe_tools, held=held)

    def after_reply(self, decision: Mapping[str, Any], found: Signal, *,
                    safe_tools: Sequence[str] | None) -> Decision | None:
        """The turn's ``decision`` again once its reply is known, with ``found`` (read from
        the reply) among the turn's signals; None where that raises the risk no further."""
        signals = [Signal(str(s["name"]), float(s["score"]), str(s.get("detail", "")))
                   for s in decision.get("signals", ())]
        signals.append(found)
        turn = self.turn_risk(signals)
        if turn <= float(decision.get("risk", 0.0)):
            return None
        return self._decision(turn, turn, signals, decision, AFTER_REPLY, safe_tools=safe_tools,
                              held=float(decision.get("held", 0.0)), after_reply=True)

    def _decision(self, risk: float, turn: float, signals: Sequence[Signal],
                  previous: Mapping[str, Any] | None, allowed: Sequence[str], *,
                  safe_tools: Sequence[str] | None, held: float,
                  after_reply: bool = False) -> Decision:
        """The actions of ``allowed`` that ``risk`` reaches; a flag and a restriction are
        raised once and kept: later decisions carry ``previous``'s state."""
        reached = [a for a in allowed
                   if getattr(self, a) is not None and risk >= getattr(self, a)]
        was_restricted = bool(previous and previous.get("restricted"))
        was_flagged = bool(previous and previous.get("flagged"))
        actions = [a for a in reached if not (a == "restrict" and was_restricted)
                   and not (a == "flag" and was_flagged)]
        restricted = was_restricted or "restrict" in reached
        return Decision(
            risk=round(risk, 3), turn_risk=round(turn, 3), actions=tuple(actions),
            signals=tuple(signals), restricted=restricted, held=round(held, 3),
            flagged=was_flagged or "flag" in reached,
            safe_tools=(tuple(safe_tools) if safe_tools is not None else None)
            if restricted else None, after_reply=after_reply)


@dataclass(frozen=True)
class Decision:
    risk: float                  # the conversation's, after this message
    turn_risk: float             # this message's, in its trajectory
    actions: tuple[str, ...]     # what this turn does, mildest first
    signals: tuple[Signal, ...]
    restricted: bool = False     # tools limited, from now on
    flagged: bool = False        # flagged for review, once and for all
    safe_tools: tuple[str, ...] | None = None
    held: float = 0.0            # a first message's reading held back until corroborated
    detectors: tuple[str, ...] = ()
    elapsed_ms: float = 0.0
    after_reply: bool = False    # made once the turn's reply was known (``after_reply``)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "risk": self.risk, "turn_risk": self.turn_risk, "actions": list(self.actions),
            "signals": [s.to_json() for s in self.signals], "restricted": self.restricted,
            "flagged": self.flagged, "detectors": list(self.detectors),
            "elapsed_ms": round(self.elapsed_ms, 3)}
        if self.held:
            out["held"] = self.held
        if self.after_reply:
            out["after_reply"] = True
        if self.restricted:
            out["safe_tools"] = None if self.safe_tools is None else list(self.safe_tools)
        return out
