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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import InputError
from threadline.providers.monitor.signals import Signal, clip
from threadline.turn.monitoring import ACTIONS

WEIGHTS = {"harm": 1.0, "decomposition": 1.0, "escalation": 1.0, "reframing": 1.0,
           "semantic": 0.7, "intent": 1.0, "persistence": 1.0, "classifier": 1.0}


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

    def __post_init__(self) -> None:
        for action in ACTIONS:
            value = getattr(self, action)
            if value is not None and not 0 < value <= 1:
                raise InputError(f"the monitor's {action} threshold must be in (0, 1] or "
                                 f"None (off); got {value!r}")
        if not 0 <= self.decay < 1:
            raise InputError(f"the monitor's risk decay must be in [0, 1); got {self.decay!r}")

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
               safe_tools: Sequence[str] | None) -> Decision:
        turn = self.turn_risk(signals)
        carried = self.decay * float(previous.get("risk", 0.0)) if previous else 0.0
        risk = max(turn, carried)
        reached = [a for a in ACTIONS
                   if getattr(self, a) is not None and risk >= getattr(self, a)]
        was_restricted = bool(previous and previous.get("restricted"))
        was_flagged = bool(previous and previous.get("flagged"))
        # a flag and a restriction are raised once and kept: later turns carry the state
        actions = [a for a in reached if not (a == "restrict" and was_restricted)
                   and not (a == "flag" and was_flagged)]
        restricted = was_restricted or "restrict" in reached
        return Decision(
            risk=round(risk, 3), turn_risk=round(turn, 3), actions=tuple(actions),
            signals=tuple(signals), restricted=restricted,
            flagged=was_flagged or "flag" in reached,
            safe_tools=(tuple(safe_tools) if safe_tools is not None else None)
            if restricted else None)


@dataclass(frozen=True)
class Decision:
    risk: float                  # the conversation's, after this message
    turn_risk: float             # this message's, in its trajectory
    actions: tuple[str, ...]     # what this turn does, mildest first
    signals: tuple[Signal, ...]
    restricted: bool = False     # tools limited, from now on
    flagged: bool = False        # flagged for review, once and for all
    safe_tools: tuple[str, ...] | None = None
    detectors: tuple[str, ...] = ()
    elapsed_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "risk": self.risk, "turn_risk": self.turn_risk, "actions": list(self.actions),
            "signals": [s.to_json() for s in self.signals], "restricted": self.restricted,
            "flagged": self.flagged, "detectors": list(self.detectors),
            "elapsed_ms": round(self.elapsed_ms, 3)}
        if self.restricted:
            out["safe_tools"] = None if self.safe_tools is None else list(self.safe_tools)
        return out
