"""Signals and detectors: what the monitor's judgement is made of.

A detector reads a :class:`~threadline.providers.monitor.trajectory.Trajectory` and returns
signals, each a named score in [0, 1] with a short reason. Detectors are pluggable: the rules
and the embedding detector are the default, a model-based classifier is an option, and an
application can add its own (any object with ``name`` and ``signals``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from threadline.providers.monitor.trajectory import Trajectory


@dataclass(frozen=True)
class Signal:
    name: str      # what was seen: harm, decomposition, escalation, reframing, drift, ...
    score: float   # 0 (nothing) to 1 (certain)
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "score": round(self.score, 3), "detail": self.detail}


class Detector(Protocol):
    name: str

    def signals(self, trajectory: Trajectory) -> Sequence[Signal]: ...


def clip(value: float) -> float:
    return max(0.0, min(1.0, value))
