"""Experiment arms: how the engine is configured for a run's conversations.

An arm builds the engine each simulated conversation runs through, over the run's store and
model; everything else (tasks, conditions, seeds, simulator, grading) is the same for every
arm, so arms compare paired. ``plain`` is the engine with nothing plugged in: no context
provider, no hook, no compactor. Threadline's interventions (compaction at a budget, the
working-state list, a recap in the tail, goal reinjection) plug in here as further arms.
"""

from __future__ import annotations

from typing import Any, Protocol

from threadline.engine import Engine
from threadline.models.base import ModelBackend
from threadline.stores.base import Store


class Arm(Protocol):
    name: str
    version: str

    def engine(self, store: Store, model: ModelBackend, *, system: str) -> Engine: ...

    def record(self) -> dict[str, Any]: ...


class Plain:
    name, version = "plain", "1"

    def engine(self, store: Store, model: ModelBackend, *, system: str) -> Engine:
        return Engine(store, model, system=system)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version,
                "engine": "Engine with no providers, hooks or compactor"}


ARMS: dict[str, type[Arm]] = {"plain": Plain}
