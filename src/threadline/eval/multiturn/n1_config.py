"""An N-1 replay config (``threadline eval n1 CONFIG``), read and checked before anything runs.

Every mistake is an InputError naming the key and what it should be; nothing is created for
a config that fails. Relative paths are read from the config file's folder. The reference is
in docs/eval.md ("N-1 replay of real transcripts").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.multiturn.arms import KINDS
from threadline.eval.multiturn.backends import BACKENDS, ModelConfig
from threadline.eval.multiturn.config import check_tables, read_toml
from threadline.eval.multiturn.judges import JUDGES
from threadline.eval.multiturn.n1_transcripts import FORMATS

REQUIRE = ("earlier", "any", "none")  # which transcripts: a rule said before the last turn,
#                                       any rule at all, or every transcript
CONSTRAINTS = "constraints"           # the reminder that lists the rules said earlier


@dataclass(frozen=True)
class Setting:
    """One side of the A/B comparison: an arm, and what it adds to every conversation."""

    name: str
    arm: str = "plain"
    system: str = ""      # appended to the transcript's own system prompt
    reminder: str = ""    # in the tail of the last turn: "constraints", or a fixed text

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arm": self.arm, "system": self.system,
                "reminder": self.reminder}


@dataclass(frozen=True)
class N1Config:
    transcripts: Path
    a: Setting
    b: Setting
    format: str = "sharegpt"
    split: str = "test"
    ids: tuple[str, ...] = ()
    limit: int | None = None
    min_turns: int = 2
    max_chars: int = 12_000
    require: str = "earlier"
    max_items: int = 8
    seed: int = 0
    model: ModelConfig = field(default_factory=lambda: ModelConfig(reply_tokens=128))
    judge: str = "none"
    judge_backend: str | None = None   # None: the run's backend
    bootstrap: int = 1000
    confidence: float = 0.95
    run_id: str | None = None
    text: str = ""

    @property
    def digest(self) -> str:
        return "b2:" + hashlib.blake2b(self.text.encode("utf-8"), digest_size=16).hexdigest()


_SECTIONS = {
    "n1": {"id", "transcripts", "format", "split", "ids", "limit", "min_turns", "max_chars",
           "require", "max_items", "seed"},
    "model": {"backend", "reply_tokens", "temperature"},
    "a": {"name", "arm", "system", "reminder"},
    "b": {"name", "arm", "system", "reminder"},
    "judge": {"kind", "version", "backend"},
    "metrics": {"bootstrap", "confidence"},
}


def load_n1_config(path: Path) -> N1Config:
    data, text = read_toml(path)
    return parse_n1_config(data, base=path.parent, text=text, where=str(path))


def parse_n1_config(data: Mapping[str, Any], *, base: Path, text: str = "",
                    where: str = "config") -> N1Config:
    def bad(key: str, should: str) -> InputError:
        return InputError(f"{where}: {key} {should}", hint="see docs/eval.md (N-1 replay) "
                                                           "for the config; nothing was run")
    check_tables(data, _SECTIONS, bad, " of an N-1 config")

    def get(section: str, key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = data.get(section, {}).get(key, default)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wrong = not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
        if value is not default and wrong:  # TOML's true is no number here
            raise bad(f"{section}.{key}", f"must be a {' or '.join(k.__name__ for k in kinds)}"
                                          f", not {value!r}")
        return value

    def choice(section: str, key: str, allowed: Any, default: str) -> str:
        value: str = get(section, key, str, default)
        if value not in allowed:
            raise bad(f"{section}.{key}", f"names {value!r}; choose from {', '.join(allowed)}")
        return value

    def at_least(section: str, key: str, low: int, default: int | None) -> Any:
        value = get(section, key, int, default)
        if value is not None and value < low:
            raise bad(f"{section}.{key}", f"must be at least {low}, not {value}")
        return value

    n1 = data.get("n1", {})
    if "transcripts" not in n1:
        raise bad("n1.transcripts", "is missing: the path of a transcript file (ShareGPT, "
                                    "WildChat or OpenAI messages)")
    transcripts = base / Path(get("n1", "transcripts", str, ""))
    if not transcripts.is_file():
        raise bad("n1.transcripts", f"names {transcripts}, which is not a file")
    run_id = get("n1", "id", str, None)
    if run_id is not None and (not run_id or not all(c.isalnum() or c in "-_." for c in run_id)
                               or run_id.startswith(".")):
        raise bad("n1.id", f"{run_id!r} must be letters, digits, '-', '_' or '.'")
    ids = get("n1", "ids", list, [])
    if not all(isinstance(i, str) for i in ids):
        raise bad("n1.ids", "must be a list of transcript ids")
    backend = choice("model", "backend", BACKENDS, "local")
    temperature = float(get("model", "temperature", (int, float), 0.7))
    if not 0 <= temperature <= 2:
        raise bad("model.temperature", f"must be between 0 and 2, not {temperature}")
    settings = []
    for side in ("a", "b"):
        if side not in data:
            raise bad(f"[{side}]", "is missing: an N-1 run compares two settings, [a] and "
                                   "[b] (each an arm, a system addition, a reminder)")
        settings.append(Setting(get(side, "name", str, side), choice(side, "arm", KINDS,
                                                                     "plain"),
                                get(side, "system", str, ""), get(side, "reminder", str, "")))
    a, b = settings
    if a.name == b.name:
        raise bad("b.name", f"is {b.name!r}, as [a]'s is: the two settings need two names")
    if a.to_json() | {"name": ""} == b.to_json() | {"name": ""}:
        raise bad("[b]", "is the same setting as [a]: there is nothing to compare")
    judge = choice("judge", "kind", JUDGES, "none")
    version = get("judge", "version", str, JUDGES[judge])
    if version != JUDGES[judge]:
        raise bad("judge.version", f"pins {version!r}, but this threadline's {judge} judge is "
                                   f"version {JUDGES[judge]!r}")
    judge_backend = get("judge", "backend", str, None)
    if judge_backend is not None and (judge == "none" or judge_backend not in BACKENDS):
        raise bad("judge.backend", "is for kind = \"model\" only, and must name one of "
                                   f"{', '.join(BACKENDS)}")
    confidence = float(get("metrics", "confidence", (int, float), 0.95))
    if not 0.5 <= confidence < 1:
        raise bad("metrics.confidence", f"must be in [0.5, 1), not {confidence}")
    return N1Config(
        transcripts=transcripts, a=a, b=b,
        format=choice("n1", "format", FORMATS, "sharegpt"),
        split=choice("n1", "split", ("dev", "test", "all"), "test"), ids=tuple(ids),
        limit=at_least("n1", "limit", 1, None), min_turns=at_least("n1", "min_turns", 1, 2),
        max_chars=at_least("n1", "max_chars", 1, 12_000),
        require=choice("n1", "require", REQUIRE, "earlier"),
        max_items=at_least("n1", "max_items", 1, 8), seed=get("n1", "seed", int, 0),
        model=ModelConfig(backend, at_least("model", "reply_tokens", 1, 128), temperature),
        judge=judge, judge_backend=judge_backend,
        bootstrap=at_least("metrics", "bootstrap", 100, 1000), confidence=confidence,
        run_id=run_id, text=text)
