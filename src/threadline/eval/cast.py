"""TREC CAsT conversational-search topics as rewrite examples (scored by ``eval.canard``).

Each topic is a conversation of user questions whose subject shifts inside it, with no title
message to anchor on. Every user turn becomes one example: the raw questions before it are the
history (the data has no answers), the raw question is the follow-up, and the organisers'
manual rewrite is the reference. The 2020 topics also carry the organisers' automatic rewrite
(a T5 model trained on CANARD), kept beside the example as a baseline.

Two formats:

- **2019**: the topics JSON (``[{"number", "turn": [{"number", "raw_utterance"}]}]``) and, in a
  separate TSV without a header, the manual rewrites (``31_2<TAB>Is throat cancer treatable?``);
- **2020**: one JSON whose turns carry ``raw_utterance``, ``manual_rewritten_utterance`` and
  ``automatic_rewritten_utterance``.

The topics' ``title`` and ``description`` fields are not shown to the rewriter: a user types
no title, and the point of the data is a subject that must come from the turns themselves.
Which year is development data and which is held out is in ``eval.splits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.canard import Example
from threadline.eval.files import read_records
from threadline.rewrite.deterministic import Turn

YEARS = (2019, 2020)
_HINT_2019 = ('a 2019 topics file is a JSON array of {"number": N, "turn": [{"number": N, '
              '"raw_utterance": "..."}]}; its rewrites are a TSV of "<topic>_<turn><TAB>'
              'rewrite" lines')
_HINT_2020 = ('a 2020 topics file is a JSON array of {"number": N, "turn": [{"number": N, '
              '"raw_utterance": "...", "manual_rewritten_utterance": "...", '
              '"automatic_rewritten_utterance": "..."}]}')


@dataclass(frozen=True)
class CastTurn:
    key: str                  # "<topic>_<turn>", as the track names it
    example: Example
    automatic: str | None     # the organisers' automatic rewrite (2020 only)

    @property
    def topic(self) -> int:
        return int(self.key.split("_")[0])


@dataclass(frozen=True)
class CastFiles:
    year: int
    topics: Path
    rewrites: Path | None     # the 2019 TSV; None for 2020, whose topics hold the rewrites


def locate(path: Path, year: int | None = None, rewrites: Path | None = None) -> CastFiles:
    """The files to read for ``path``: a topics JSON (its year told by its format), or a
    folder holding the track's files (``year`` picks which; 2019, the dev year, by default)."""
    if path.is_dir():
        chosen = year or 2019
        topics = _one(path, f"*{chosen}*topics*.json", f"the {chosen} topics JSON", chosen)
        if chosen == 2020:
            return CastFiles(2020, topics, None)
        return CastFiles(2019, topics,
                         rewrites or _one(path, "*2019*resolved*.tsv",
                                          "the 2019 manual rewrites TSV", 2019))
    if path.suffix.casefold() == ".tsv":
        raise InputError(f"{path} is a rewrites TSV, not a topics file",
                         hint="pass the 2019 topics JSON (or the folder holding both) and give "
                              "the TSV with --rewrites if it is not beside it")
    records = read_records(path, what="CAsT topics")
    found = 2020 if _has_manual_rewrites(records) else 2019
    _topics(path, records, _HINT_2020 if found == 2020 else _HINT_2019)  # is it CAsT at all?
    if year is not None and year != found:
        raise InputError(f"{path} is in the CAsT {found} format, not {year}'s",
                         hint=_HINT_2020 if year == 2020 else _HINT_2019)
    if found == 2020:
        return CastFiles(2020, path, None)
    if rewrites is None:
        beside = sorted(path.parent.glob("*resolved*.tsv"))
        if len(beside) != 1:
            raise InputError(f"{path} holds 2019 topics, whose manual rewrites are in a "
                             f"separate TSV; {len(beside)} '*resolved*.tsv' files are beside it",
                             hint="name the rewrites file with --rewrites FILE")
        rewrites = beside[0]
    return CastFiles(2019, path, rewrites)


def load(files: CastFiles) -> list[CastTurn]:
    """Every user turn of every topic, in order, or InputError saying what is wrong."""
    records = read_records(files.topics, what="CAsT topics")
    if files.year == 2020:
        return _load_2020(files.topics, records)
    assert files.rewrites is not None
    return _load_2019(files.topics, records, _read_tsv(files.rewrites))


def _load_2019(path: Path, records: list[Any], manual: dict[str, str]) -> list[CastTurn]:
    out = []
    for topic, turns in _topics(path, records, _HINT_2019):
        history: list[Turn] = []
        for number, turn in turns:
            key = f"{topic}_{number}"
            if key not in manual:
                raise InputError(f"{path}: turn {key} has no manual rewrite in the TSV",
                                 hint="use the TSV published with these topics")
            out.append(CastTurn(key, Example(tuple(history), turn["raw_utterance"],
                                             manual[key]), None))
            history.append(Turn("user", turn["raw_utterance"]))
    return out


def _load_2020(path: Path, records: list[Any]) -> list[CastTurn]:
    out = []
    for topic, turns in _topics(path, records, _HINT_2020):
        history: list[Turn] = []
        for number, turn in turns:
            key = f"{topic}_{number}"
            manual, automatic = (turn.get("manual_rewritten_utterance"),
                                 turn.get("automatic_rewritten_utterance"))
            if not isinstance(manual, str) or not isinstance(automatic, (str, type(None))):
                raise InputError(f"{path}: turn {key} has no manual rewrite string",
                                 hint=_HINT_2020)
            out.append(CastTurn(key, Example(tuple(history), turn["raw_utterance"], manual),
                                automatic))
            history.append(Turn("user", turn["raw_utterance"]))
    return out


def _topics(path: Path, records: list[Any],
            hint: str) -> list[tuple[int, list[tuple[int, dict[str, Any]]]]]:
    """(topic number, [(turn number, turn)]) for each well-formed topic, turns in order."""
    out = []
    for n, record in enumerate(records):
        turns = record.get("turn") if isinstance(record, dict) else None
        if not (isinstance(record, dict) and isinstance(record.get("number"), int)
                and isinstance(turns, list) and turns
                and all(isinstance(t, dict) and isinstance(t.get("number"), int)
                        and isinstance(t.get("raw_utterance"), str) for t in turns)):
            raise InputError(f"{path}: record {n} is not a CAsT topic", hint=hint)
        out.append((record["number"],
                    sorted(((t["number"], t) for t in turns), key=lambda pair: pair[0])))
    return out


def _read_tsv(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text") from err
    out = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        key, tab, text = line.partition("\t")
        topic, _, turn = key.partition("_")
        if not (tab and topic.isdigit() and turn.isdigit() and text.strip()):
            raise InputError(f"{path}: line {n} is not '<topic>_<turn><TAB>rewrite'",
                             hint=_HINT_2019)
        out[key] = text.strip()
    if not out:
        raise InputError(f"{path} holds no rewrites", hint=_HINT_2019)
    return out


def _has_manual_rewrites(records: list[Any]) -> bool:
    return any(isinstance(r, dict) and isinstance(r.get("turn"), list)
               and any(isinstance(t, dict) and "manual_rewritten_utterance" in t
                       for t in r["turn"]) for r in records)


def _one(folder: Path, pattern: str, what: str, year: int) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise InputError(f"{folder} holds {len(found)} files like '{pattern}', not one: "
                         f"cannot tell which is {what}",
                         hint=f"pass the file itself (with --year {year})")
    return found[0]
