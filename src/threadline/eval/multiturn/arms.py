"""Experiment arms: how the engine is configured for a run's conversations.

An arm builds the engine each simulated conversation runs through, over the run's store and
model; everything else (tasks, conditions, seeds, simulator, grading) is the same for every
arm, so arms compare paired: trial *i* of a task has the same seed under every arm. Each arm
plugs into the engine only through its seams (context providers, the compactor), so what it
changes is what any application could change:

    plain          the engine with nothing plugged in
    compaction     the engine's compactor at a token budget: past it, before a call, the
                   turns that leave the view are summarised (recall first, no model) and the
                   standing constraints pinned
    working-state  the requirements list kept from the user's turns, in the tail every turn
    recap          on the last turn, a recap of everything the user said, in the tail
    goal           the goal restated in the tail every N turns

The last three add to the tail only, below every cache breakpoint: the prefix the plain arm
sends is theirs too. Compaction resets the prefix when it fires (a recorded, expected reset).

A config names arms in ``run.arms``; ``[arms.NAME]`` gives one its parameters, its ``kind``
(default: its name, so two compaction arms at two budgets can run side by side) and the
``conditions`` it runs under (default: all the run's). The run record keeps each arm's name,
kind, version and parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from threadline.compaction.auto import Compaction
from threadline.compaction.plan import Policy
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.eval.multiturn.conditions import Condition
from threadline.eval.multiturn.interventions import Goal, Recap, Requirements
from threadline.models.base import ModelBackend
from threadline.stores.base import Store
from threadline.turn.compactor import Compactor
from threadline.turn.providers import ContextProvider

Bad = Callable[[str, str], InputError]  # (key, what it should be) -> the config's error


class Arm(Protocol):
    name: str                          # as the run names it (its trials, its report rows)
    kind: str
    version: str
    conditions: tuple[Condition, ...]  # the conditions it runs under

    def engine(self, store: Store, model: ModelBackend, *, system: str,
               turns: int) -> Engine:
        """The engine for one conversation of at most ``turns`` user turns."""
        ...

    def record(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Param:
    type: type
    default: Any
    minimum: int | None = None


class BaseArm:
    """An arm of one kind: its parameters checked, its engine built from providers and a
    compactor (override ``providers`` and ``compactor``)."""

    kind: str = ""
    version: str = "1"
    params: ClassVar[dict[str, Param]] = {}
    summary: ClassVar[str] = ""

    def __init__(self, name: str | None = None,
                 conditions: Sequence[Condition] = tuple(Condition), **values: Any) -> None:
        unknown = sorted(set(values) - set(self.params))
        if unknown:
            raise InputError(f"a {self.kind} arm has no parameter {unknown[0]!r}")
        self.name = name or self.kind
        self.conditions = tuple(conditions)
        self.values = {key: p.default for key, p in self.params.items()} | values

    def providers(self, turns: int) -> list[ContextProvider]:
        return []

    def compactor(self) -> Compactor | None:
        return None

    def engine(self, store: Store, model: ModelBackend, *, system: str,
               turns: int) -> Engine:
        return Engine(store, model, system=system, providers=self.providers(turns),
                      compactor=self.compactor())

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "version": self.version,
                "params": dict(self.values), "conditions": [str(c) for c in self.conditions],
                "engine": self.summary}

    @classmethod
    def check(cls, values: Mapping[str, Any], key: Callable[[str], str], bad: Bad) -> None:
        """Checks across parameters (each one's type and minimum are checked before)."""


class Plain(BaseArm):
    kind, summary = "plain", "Engine with no providers, hooks or compactor"


class CompactionArm(BaseArm):
    kind = "compaction"
    summary = "Engine with compaction.Compaction: past `budget` tokens, compact down to " \
              "`target` before the call (always applied, as at a context limit)"
    params = {
        "budget": Param(int, 1024, 64),   # compact when the request would pass it (tokens)
        "target": Param(int, None, 1),    # … down to this (default: half the budget)
        "summarize": Param(bool, True),   # the turns that leave are summarised, or dropped
    }

    @classmethod
    def check(cls, values: Mapping[str, Any], key: Callable[[str], str], bad: Bad) -> None:
        budget = values.get("budget", cls.params["budget"].default)
        target = values.get("target")
        if target is not None and target >= budget:
            raise bad(key("target"), f"must be below the budget ({budget}), not {target}")

    def policy(self) -> Policy:
        budget = self.values["budget"]
        # the budget as the hard limit: past it a compaction is applied whatever its price
        return Policy(high_water=budget, low_water=self.values["target"] or budget // 2,
                      context_window=budget, reserve=0, summarize=self.values["summarize"],
                      profile="ideal")

    def compactor(self) -> Compactor | None:
        return Compaction(self.policy())


class WorkingStateArm(BaseArm):
    kind = "working-state"
    summary = "Engine with a working-state provider: the goal and every later user message " \
              "as a requirement, in the tail every turn"

    def providers(self, turns: int) -> list[ContextProvider]:
        return [Requirements()]


class RecapArm(BaseArm):
    kind = "recap"
    summary = "Engine with a recap provider: on the last turn, every earlier user message " \
              "in the tail"

    def providers(self, turns: int) -> list[ContextProvider]:
        return [Recap(turns)]


class GoalArm(BaseArm):
    kind = "goal"
    summary = "Engine with a goal provider: the first user message restated in the tail on " \
              "turns 1 + N, 1 + 2N, …"
    params = {"every": Param(int, 2, 1)}  # restate the goal every N turns

    def providers(self, turns: int) -> list[ContextProvider]:
        return [Goal(self.values["every"])]


KINDS: dict[str, type[BaseArm]] = {arm.kind: arm for arm in (
    Plain, CompactionArm, WorkingStateArm, RecapArm, GoalArm)}


def arm_from_config(name: str, table: Mapping[str, Any] | None,
                    run_conditions: Sequence[Condition], bad: Bad) -> BaseArm:
    """The arm ``run.arms`` names ``name``, with its ``[arms.NAME]`` table (if any), checked:
    every mistake is ``bad(key, what it should be)``."""
    table = table or {}

    def key(part: str) -> str:
        return f"arms.{name}.{part}"
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise bad("run.arms", f"names {name!r}: an arm's name is letters, digits, '-', '_' "
                              "or '.'")
    kind = table.get("kind", name)
    if not isinstance(kind, str) or kind not in KINDS:
        if "kind" in table:
            raise bad(key("kind"), f"names {kind!r}; choose from {', '.join(KINDS)}")
        raise bad("run.arms", f"names {name!r}; choose from {', '.join(KINDS)}, or give it "
                              f"a kind in [arms.{name}]")
    arm = KINDS[kind]
    allowed = {"kind", "conditions", *arm.params}
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise bad(key(unknown[0]), f"is not a parameter of a {kind} arm; its keys are "
                                   f"{', '.join(sorted(allowed))}")
    values: dict[str, Any] = {}
    for param, spec in arm.params.items():
        if param not in table:
            continue
        value: Any = table[param]
        if not _is(value, spec.type):
            raise bad(key(param), f"must be a {spec.type.__name__}, not {value!r}")
        if spec.minimum is not None and value < spec.minimum:
            raise bad(key(param), f"must be at least {spec.minimum}, not {value}")
        values[param] = value
    arm.check(values, key, bad)
    conditions = tuple(run_conditions)
    if "conditions" in table:
        chosen = table["conditions"]
        if not isinstance(chosen, list) or not chosen or not all(
                isinstance(c, str) for c in chosen):
            raise bad(key("conditions"), "must be a non-empty list of condition names")
        for condition in chosen:
            if condition not in run_conditions:
                raise bad(key("conditions"), f"names {condition!r}, which the run does not "
                                             f"run (run.conditions: "
                                             f"{', '.join(run_conditions)})")
        conditions = tuple(c for c in run_conditions if c in chosen)
    return arm(name, conditions, **values)


def _is(value: Any, kind: type) -> bool:
    """Whether ``value`` is a ``kind`` (TOML's true is no number here)."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
