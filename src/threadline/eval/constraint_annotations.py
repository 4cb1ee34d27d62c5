"""Hand annotations of standing constraints, stored without the text they label.

What was annotated (every sentence of the corpus falls in one stratum):

candidate   every sentence a broad, high-recall keyword filter (``CANDIDATE``) matches, all
            of them read and labelled: a census of the stratum;
sample      a 4% random sample (by a hash of the sentence's address) of the sentences the
            filter does not match, read and labelled too, so that the rules the filter misses
            are counted: each sampled sentence stands for 25 unread ones;
unread      the other non-candidates; estimated from the sample.

The filter and the sample were fixed before any labelling, and the labels before any
detector was tuned. A label is one of ``POSITIVE`` (a sentence that sets a rule for the rest
of the conversation, by its main kind) or ``one_off`` (a near-miss: a request that reads like
a rule but is about one deliverable) or ``none``. The file lists every positive and one-off
sentence; a candidate or sampled sentence it does not list is ``none``. Its first line is a
header with the number of candidate and sampled sentences per split and source, so a change
in the data or in the filter is an error rather than a silent shift of the figures. Each
record carries a short hash of its sentence so a moved offset is caught the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.constraint_corpus import Sentence, corpus

POSITIVE = ("scope", "persona", "language", "format", "prohibition", "preference")
LABELS = (*POSITIVE, "one_off", "none")
SAMPLE_PER_MILLE = 40
ANNOTATIONS = Path(__file__).parent / "annotations" / "constraints.jsonl"
FORMAT = "threadline-constraint-annotations/1"

# Frozen: the strata of the stored annotations depend on it. Broad on purpose (a quarter of
# all sentences match); it only decides which sentences were read in full.
CANDIDATE = re.compile(
    r"\b(?:always|never|every|each|whenever|from now|going forward|onwards?|rest of|"
    r"until|remember|keep|stay|only|don'?t|do not|dont|avoid|stop|must|shall|should|"
    r"you will|you'll|you are|you're|your role|act as|acting as|pretend|role|persona|imagine|"
    r"behave|character|respond|reply|replies|answers|responses|response|output|format|style|"
    r"tone|language|english|french|spanish|german|chinese|japanese|korean|arabic|portuguese|"
    r"italian|russian|hindi|vietnamese|indonesian|turkish|dutch|polish|persian|hebrew|thai|"
    r"ukrainian|prefer|rather|call me|address me|refer to me|rules?|instructions?|future|"
    r"subsequent|following|no more|without|refrain|limit|at most|words or less|under \d+|"
    r"concise|brief|short|bullet|table|markdown|code block|explanations?|simulate|game|play|"
    r"formal|casual|spelling|units|metric|unless|throughout|for all|all of your|in all)\b",
    re.I)


@dataclass(frozen=True)
class Annotated:
    sentence: Sentence
    stratum: str   # candidate | sample
    label: str

    @property
    def positive(self) -> bool:
        return self.label in POSITIVE


def source_of(file: str) -> str:
    return file.split("/", 1)[0]


def stratum(sentence: Sentence) -> str | None:
    """``candidate``, ``sample`` or None (unread) for a sentence of the corpus."""
    if CANDIDATE.search(sentence.text):
        return "candidate"
    return "sample" if _per_mille(sentence) < SAMPLE_PER_MILLE else None


def _per_mille(sentence: Sentence) -> int:
    address = json.dumps(list(sentence.key))
    return int(hashlib.sha256(address.encode()).hexdigest()[:8], 16) % 1000


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Strata:
    """Sentence counts by (split, source): how many were read in each stratum, and how many
    non-candidates there are in all (what the sample stands for)."""

    candidate: dict[tuple[str, str], int]
    sample: dict[tuple[str, str], int]
    non_candidate: dict[tuple[str, str], int]

    def weight(self, split: str, source: str) -> float:
        """How many non-candidate sentences one sampled sentence stands for."""
        sampled = self.sample.get((split, source), 0)
        return self.non_candidate.get((split, source), 0) / sampled if sampled else 0.0

    def to_json(self) -> dict[str, Any]:
        def flat(counts: dict[tuple[str, str], int]) -> dict[str, int]:
            return {f"{split}/{source}": n for (split, source), n in sorted(counts.items())}
        return {"candidate": flat(self.candidate), "sample": flat(self.sample),
                "non_candidate": flat(self.non_candidate)}


def count_strata(sentences: Iterable[Sentence],
                 read: list[tuple[Sentence, str]] | None = None) -> Strata:
    """The strata counts of ``sentences``; the candidate and sampled ones (with their
    stratum) are appended to ``read`` if given."""
    candidate: Counter[tuple[str, str]] = Counter()
    sample: Counter[tuple[str, str]] = Counter()
    non_candidate: Counter[tuple[str, str]] = Counter()
    for sentence in sentences:
        where = (sentence.split, source_of(sentence.file))
        kind = stratum(sentence)
        if kind != "candidate":
            non_candidate[where] += 1
        if kind is None:
            continue
        (candidate if kind == "candidate" else sample)[where] += 1
        if read is not None:
            read.append((sentence, kind))
    return Strata(dict(candidate), dict(sample), dict(non_candidate))


def header(strata: Strata) -> dict[str, Any]:
    """The first line of an annotation file over sentences with these strata."""
    counts = strata.to_json()
    return {"format": FORMAT, "strata": {"candidate": counts["candidate"],
                                         "sample": counts["sample"]}}


def read_annotations(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and records of an annotation file, or InputError saying what is wrong."""
    try:
        lines = [line for line in path.read_text("utf-8").splitlines() if line.strip()]
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text") from err
    rows = []
    for n, line in enumerate(lines, start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise InputError(f"{path}: line {n} is not JSON: {err}",
                             hint="the file holds one JSON object per line") from err
    if not rows or not isinstance(rows[0], dict) or rows[0].get("format") != FORMAT:
        raise InputError(f"{path} is not a constraint annotation file",
                         hint=f'its first line must be a header with "format": "{FORMAT}"')
    header, records = rows[0], rows[1:]
    for n, record in enumerate(records, start=2):
        if not (isinstance(record, dict)
                and all(isinstance(record.get(k), str) for k in ("file", "conversation",
                                                                 "label", "hash"))
                and all(type(record.get(k)) is int for k in ("message", "start", "end"))
                and record["label"] in LABELS and record["label"] != "none"):
            raise InputError(f"{path}: line {n} is not an annotation record",
                             hint='each needs "file", "conversation", "message", "start", '
                                  f'"end", "hash" and a "label" out of {", ".join(LABELS[:-1])}')
    return header, records


def join(sentences: Iterable[Sentence], header: dict[str, Any],
         records: Sequence[dict[str, Any]]) -> tuple[list[Annotated], Strata]:
    """The annotated sentences (candidate and sampled) with their labels, and the strata
    counts; InputError when the data or the filter no longer match what was annotated."""
    labels = {(r["file"], r["conversation"], r["message"], r["start"], r["end"]): r
              for r in records}
    annotated: list[Annotated] = []
    read: list[tuple[Sentence, str]] = []
    strata = count_strata(sentences, read)
    for sentence, kind in read:
        record = labels.pop(sentence.key, None)
        if record is not None and record["hash"] != text_hash(sentence.text):
            raise InputError(f"annotation {sentence.key} no longer matches its sentence",
                             hint="the data changed since it was annotated")
        annotated.append(Annotated(sentence, kind, record["label"] if record else "none"))
    expected = header.get("strata", {})
    found = strata.to_json()
    for kind in ("candidate", "sample"):
        if expected.get(kind) != found[kind]:
            raise InputError(f"the data's {kind} sentences ({found[kind]}) are not the ones "
                             f"annotated ({expected.get(kind)})",
                             hint="the data or the candidate filter changed since annotation")
    if labels:
        raise InputError(f"{len(labels)} annotations address no candidate or sampled sentence,"
                         f" e.g. {next(iter(labels))}",
                         hint="the data changed since it was annotated")
    return annotated, strata


def load(data: Path, path: Path) -> tuple[list[Annotated], Strata]:
    header, records = read_annotations(path)
    return join(corpus(data), header, records)
