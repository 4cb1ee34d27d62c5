"""A run's TOML config, read and checked before anything runs.

Every mistake is an InputError that names the key and says what it should be; nothing is
created for a config that fails. Relative paths are read from the config file's folder.
See docs/eval.md for the reference.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.cache.pricing import profile
from threadline.errors import InputError
from threadline.eval.multiturn.arms import KINDS, Bad, BaseArm, arm_from_config
from threadline.eval.multiturn.backends import BACKENDS, ModelConfig
from threadline.eval.multiturn.conditions import Condition
from threadline.eval.multiturn.simulators import ModelSimulator, ShardRevealer
from threadline.eval.multiturn.tasks import GRADED

SIMULATORS = {ShardRevealer.name: ShardRevealer.version, ModelSimulator.name:
              ModelSimulator.version}
JUDGES = {"none": "0"}


@dataclass(frozen=True)
class SimulatorConfig:
    kind: str = ShardRevealer.name
    version: str = ShardRevealer.version
    backend: str | None = None  # for the model simulator: its own backend (None: the run's)


@dataclass(frozen=True)
class RunConfig:
    tasks: Path
    kinds: tuple[str, ...] = GRADED
    ids: tuple[str, ...] = ()
    limit: int | None = None          # tasks of each kind, the first N in the file
    conditions: tuple[Condition, ...] = (Condition.FULL, Condition.CONCAT, Condition.SHARDED)
    arms: tuple[BaseArm, ...] = field(default_factory=lambda: (KINDS["plain"](),))
    k: int = 10                       # trials per task, condition and arm
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    judge: str = "none"
    price_profile: str = "anthropic-5m"
    input_price: float = 3.0          # USD per million input tokens (list price)
    output_price: float = 15.0        # USD per million output tokens
    bootstrap: int = 1000             # resamples behind every confidence interval
    confidence: float = 0.95
    run_id: str | None = None
    text: str = ""                    # the file as read, kept with the run

    @property
    def digest(self) -> str:
        return "b2:" + hashlib.blake2b(self.text.encode("utf-8"), digest_size=16).hexdigest()


_SECTIONS: dict[str, set[str] | None] = {
    "run": {"id", "tasks", "kinds", "ids", "limit", "conditions", "arms", "k", "seed"},
    "model": {"backend", "reply_tokens", "temperature"},
    "simulator": {"kind", "version", "backend"},
    "judge": {"kind", "version"},
    "pricing": {"profile", "input_price", "output_price"},
    "metrics": {"bootstrap", "confidence"},
    "arms": None,  # a table per arm, named by run.arms (checked by arms.arm_from_config)
}


def read_toml(path: Path) -> tuple[dict[str, Any], str]:
    """A config file's tables and its text (kept in the run), or a clear error."""
    try:
        text = path.read_text("utf-8")
    except OSError as err:
        raise InputError(f"cannot read the config {path}: {err.strerror or err}") from err
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path} is not valid TOML: {err}") from err


def check_tables(data: Mapping[str, Any], sections: Mapping[str, set[str] | None], bad: Bad,
                 of: str = "") -> None:
    """Every section is one of ``sections`` and a table, with none but its keys (None: any
    key, checked later)."""
    for section, value in data.items():
        if section not in sections:
            raise bad(f"[{section}]", f"is not a section{of}; the sections are "
                                      f"{', '.join(sections)}")
        if not isinstance(value, dict):
            raise bad(f"[{section}]", "must be a table")
        keys = sections[section]
        unknown = sorted(set(value) - keys) if keys is not None else []
        if unknown:
            raise bad(f"{section}.{unknown[0]}", f"is not a key of [{section}]; its keys are "
                                                 f"{', '.join(sorted(keys or ()))}")


def load_config(path: Path) -> RunConfig:
    data, text = read_toml(path)
    return parse_config(data, base=path.parent, text=text, where=str(path))


def parse_config(data: Mapping[str, Any], *, base: Path, text: str = "",
                 where: str = "config") -> RunConfig:
    def bad(key: str, should: str) -> InputError:
        return InputError(f"{where}: {key} {should}", hint="see docs/eval.md for the config "
                                                           "reference; nothing was run")
    check_tables(data, _SECTIONS, bad)
    run = data.get("run", {})
    model, sim = data.get("model", {}), data.get("simulator", {})
    judge, pricing, metrics = data.get("judge", {}), data.get("pricing", {}), \
        data.get("metrics", {})

    def get(table: Mapping[str, Any], section: str, key: str, kind: type | tuple[type, ...],
            default: Any) -> Any:
        value = table.get(key, default)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wrong = not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
        if value is not default and wrong:  # TOML's true is no number here
            raise bad(f"{section}.{key}", f"must be a {' or '.join(k.__name__ for k in kinds)}"
                                          f", not {value!r}")
        return value

    def names(section: str, key: str, table: Mapping[str, Any], allowed: Any,
              default: tuple[str, ...]) -> tuple[str, ...]:
        value = get(table, section, key, list, None)
        if value is None:
            return default
        if not value or not all(isinstance(v, str) for v in value):
            raise bad(f"{section}.{key}", "must be a non-empty list of names")
        for name in value:
            if name not in allowed:
                raise bad(f"{section}.{key}", f"names {name!r}; choose from "
                                              f"{', '.join(allowed)}")
        return tuple(dict.fromkeys(value))

    if "tasks" not in run:
        raise bad("run.tasks", "is missing: the path of a sharded-instructions JSON file")
    tasks = base / Path(get(run, "run", "tasks", str, ""))
    if not tasks.is_file():
        raise bad("run.tasks", f"names {tasks}, which is not a file")
    k = get(run, "run", "k", int, 10)
    if k < 1:
        raise bad("run.k", f"must be at least 1 (trials per task), not {k}")
    limit = get(run, "run", "limit", int, None)
    if limit is not None and limit < 1:
        raise bad("run.limit", f"must be at least 1, not {limit}")
    run_id = get(run, "run", "id", str, None)
    if run_id is not None and (not run_id or not all(c.isalnum() or c in "-_." for c in run_id)
                               or run_id.startswith(".")):
        raise bad("run.id", f"{run_id!r} must be letters, digits, '-', '_' or '.'")
    backend = get(model, "model", "backend", str, "local")
    if backend not in BACKENDS:
        raise bad("model.backend", f"names {backend!r}; choose from {', '.join(BACKENDS)}")
    reply_tokens = get(model, "model", "reply_tokens", int, 256)
    if reply_tokens < 1:
        raise bad("model.reply_tokens", f"must be at least 1, not {reply_tokens}")
    temperature = float(get(model, "model", "temperature", (int, float), 0.7))
    if not 0 <= temperature <= 2:
        raise bad("model.temperature", f"must be between 0 and 2, not {temperature}")
    kind = get(sim, "simulator", "kind", str, ShardRevealer.name)
    if kind not in SIMULATORS:
        raise bad("simulator.kind", f"names {kind!r}; choose from {', '.join(SIMULATORS)}")
    version = get(sim, "simulator", "version", str, SIMULATORS[kind])
    if version != SIMULATORS[kind]:
        raise bad("simulator.version", f"pins {version!r}, but this threadline's {kind} "
                                       f"simulator is version {SIMULATORS[kind]!r}")
    sim_backend = get(sim, "simulator", "backend", str, None)
    if sim_backend is not None and (kind != ModelSimulator.name or sim_backend not in BACKENDS):
        raise bad("simulator.backend", "is for kind = \"model\" only, and must name one of "
                                       f"{', '.join(BACKENDS)}")
    judge_kind = get(judge, "judge", "kind", str, "none")
    if judge_kind not in JUDGES:
        raise bad("judge.kind", f"names {judge_kind!r}; no judge is built yet: use \"none\"")
    price_profile = get(pricing, "pricing", "profile", str, "anthropic-5m")
    profile(price_profile)  # an unknown profile names the known ones
    prices = [float(get(pricing, "pricing", key, (int, float), default))
              for key, default in (("input_price", 3.0), ("output_price", 15.0))]
    if min(prices) < 0:
        raise bad("pricing", "prices must not be negative")
    bootstrap = get(metrics, "metrics", "bootstrap", int, 1000)
    if bootstrap < 100:
        raise bad("metrics.bootstrap", f"must be at least 100 resamples, not {bootstrap}")
    confidence = float(get(metrics, "metrics", "confidence", (int, float), 0.95))
    if not 0.5 <= confidence < 1:
        raise bad("metrics.confidence", f"must be in [0.5, 1), not {confidence}")
    ids = get(run, "run", "ids", list, [])
    if not all(isinstance(i, str) for i in ids):
        raise bad("run.ids", "must be a list of task ids")
    conditions = tuple(Condition(c) for c in names(
        "run", "conditions", run, [c.value for c in Condition], ("full", "concat", "sharded")))
    return RunConfig(
        tasks=tasks, kinds=names("run", "kinds", run, GRADED, GRADED), ids=tuple(ids),
        limit=limit, conditions=conditions, arms=arms(run, data.get("arms", {}), conditions,
                                                      get, bad), k=k,
        seed=get(run, "run", "seed", int, 0),
        model=ModelConfig(backend, reply_tokens, temperature),
        simulator=SimulatorConfig(kind, version, sim_backend), judge=judge_kind,
        price_profile=price_profile, input_price=prices[0], output_price=prices[1],
        bootstrap=bootstrap, confidence=confidence, run_id=run_id, text=text)


def arms(run: Mapping[str, Any], tables: Mapping[str, Any], conditions: tuple[Condition, ...],
         get: Callable[..., Any], bad: Callable[[str, str], InputError]) -> tuple[BaseArm, ...]:
    """The arms ``run.arms`` names, each with its ``[arms.NAME]`` table; a table no arm
    uses is a mistake too (a misspelt name would otherwise run with the defaults)."""
    named = get(run, "run", "arms", list, None)
    if named is None:
        named = ["plain"]
    if not named or not all(isinstance(v, str) for v in named):
        raise bad("run.arms", "must be a non-empty list of names")
    named = list(dict.fromkeys(named))
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise bad(f"arms.{name}", "must be a table of the arm's parameters")
        if name not in named:
            raise bad(f"[arms.{name}]", f"gives parameters to an arm run.arms does not name "
                                        f"(it names {', '.join(named)})")
    return tuple(arm_from_config(name, tables.get(name), conditions, bad) for name in named)
