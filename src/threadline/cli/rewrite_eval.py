"""``threadline eval canard`` and ``threadline eval cast``: the rewriters scored on external
follow-up data (registered in ``cli/evaluate.py``). Each report names the split it ran on
(``eval.splits``): dev data the rewriter was tuned on, or held-out test data."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from threadline.cli._common import Context, json_option, model_option, output, pass_context
from threadline.errors import InputError
from threadline.eval import cast as cast_data
from threadline.eval.canard import Attempt, Example, load_canard, score, timed
from threadline.eval.splits import (
    CAST_2020_SPLITS,
    CAST_SPLITS,
    HALVES,
    Split,
    canard_split,
    cast_2020_half,
)
from threadline.rewrite import DEFAULT_DEADLINE_S, Rewriter, race
from threadline.rewrite.deterministic import rewrite as carry
from threadline.rewrite.model import model_rewriter
from threadline.rewrite.salience import PhraseFinder, rule_phrases

_REWRITER = model_option("The model rewriter's backend.")
_DEADLINE = click.option("--deadline", type=click.FloatRange(0.001, 60), default=DEFAULT_DEADLINE_S,
                         show_default=True, help="Seconds before the raw message is used.")
_PHRASES = click.option(
    "--phrases", type=click.Choice(["rules", "spacy"]), default="rules", show_default=True,
    help="Where the deterministic rewriter's noun phrases come from: its own rules, or "
         "spaCy's tagger (the nlp extra).")
_MODEL_LIMIT = click.option(
    "--model-limit", type=click.IntRange(0), default=100, show_default=True,
    help="Examples for the model rewriter alone (it is slow on a CPU); the race runs on all. "
         "0 skips both.")


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--limit", type=click.IntRange(1), help="Only the first N examples.")
@_PHRASES
@_REWRITER
@_MODEL_LIMIT
@_DEADLINE
@json_option()
@pass_context
def canard(ctx: Context, file: Path, limit: int | None, phrases: str, model_name: str | None,
           model_limit: int, deadline: float, as_json: bool) -> None:
    """Score the rewriters on a file in CANARD's format (History, Question, Rewrite).

    CANARD's dev file is development data (the rewriter was tuned on it); the report says so."""
    examples = load_canard(file)[:limit]
    split = canard_split(file)
    report = _evaluate(ctx, split, examples, {}, phrases, model_name, model_limit, deadline,
                       as_json)
    report = {"file": str(file), **report}
    output(report, as_json, lambda: _print(report))


@click.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--year", type=click.Choice([str(y) for y in cast_data.YEARS]),
              help="Which year's topics, when PATH is the folder holding the track's files "
                   "[default: 2019, the dev year]. With a file, its format tells the year.")
@click.option("--rewrites", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The 2019 manual rewrites TSV, if it is not the one '*resolved*.tsv' beside "
                   "the topics.")
@click.option("--half", type=click.Choice(HALVES),
              help="Which half of the 2020 topics (split by a hash of the topic number): "
                   "'test' is held out, 'dev' was tuned on, 'all' is both [default: test].")
@click.option("--limit", type=click.IntRange(1), help="Only the first N turns.")
@_PHRASES
@_REWRITER
@_MODEL_LIMIT
@_DEADLINE
@json_option()
@pass_context
def cast(ctx: Context, path: Path, year: str | None, rewrites: Path | None, half: str | None,
         limit: int | None, phrases: str, model_name: str | None, model_limit: int,
         deadline: float, as_json: bool) -> None:
    """Score the rewriters on TREC CAsT topics: conversations whose subject shifts, with human
    rewrites of every turn.

    PATH is a topics JSON (2019 or 2020 format) or the folder holding the track's files. 2019
    is development data (the rewriter was tuned on it). The 2020 topics are halved by topic:
    the test half is held out, the dev half was tuned on; on both the organisers' automatic
    rewrites are scored beside ours."""
    files = cast_data.locate(path, int(year) if year else None, rewrites)
    turns = cast_data.load(files)
    split = CAST_SPLITS[files.year]
    if files.year == 2020:
        chosen = half or "test"
        split = CAST_2020_SPLITS[chosen]
        turns = [t for t in turns if chosen == "all" or cast_2020_half(t.topic) == chosen]
    elif half is not None:
        raise InputError("--half picks a half of the 2020 topics; the 2019 topics are all dev",
                         hint="leave --half out, or pass --year 2020")
    turns = turns[:limit]
    examples = [turn.example for turn in turns]
    given: dict[str, tuple[list[Example], Attempt]] = {}
    if files.year == 2020:
        automatic = {id(turn.example): turn.automatic or turn.example.question for turn in turns}
        given["automatic"] = (examples, _given(automatic))
    report = _evaluate(ctx, split, examples, given, phrases, model_name,
                       model_limit, deadline, as_json)
    report = {"file": str(files.topics), "rewrites_file": str(files.rewrites)
              if files.rewrites else None, "year": files.year, **report}
    if "automatic" in report["rewriters"]:
        report["rewriters"]["automatic"].update(
            latency_p50_ms=None, latency_p99_ms=None,
            note="the organisers' T5 rewrites, read from the file: latency not measured")
    output(report, as_json, lambda: _print(report))


def _evaluate(ctx: Context, split: Split, examples: list[Example],
              given: dict[str, tuple[list[Example], Attempt]], phrases: str,
              model_name: str | None, model_limit: int, deadline: float,
              quiet: bool) -> dict[str, Any]:
    """Every rewriter scored on ``examples``: the raw question, the rewriters ``given`` (read
    from the data), the rule path before the salient antecedent (``topic rules``), the
    deterministic rewriter, and the model alone and raced if asked; and what the salience
    step costs per turn against the rule path before it."""
    subset = examples[:model_limit]
    finder = _phrase_finder(phrases)
    attempts: dict[str, tuple[Sequence[Example], Attempt]] = {
        "raw": (examples, timed(lambda history, text: text)), **given,
        "topic rules": (examples, timed(lambda history, text: carry(history, text,
                                                                    follow=False))),
        "deterministic": (examples, timed(lambda history, text: carry(history, text,
                                                                      phrases=finder))),
    }
    if subset:
        engine = ctx.engine(ctx.model(model_name))
        model = model_rewriter(engine.model, engine.model_lock)
        alone = model_rewriter(engine.model, engine.model_lock, hedge_s=0)
        attempts["model"] = (subset, _model_alone(alone.run))
        deterministic = Rewriter("deterministic",
                                 lambda history, text, cancelled: carry(history, text,
                                                                        phrases=finder))
        attempts["race"] = (examples, _raced([deterministic, model], deadline))
    report: dict[str, Any] = {"split": split.to_json(), "examples": len(examples),
                              "model_examples": len(subset), "deadline_s": deadline,
                              "rewriters": {}}
    for name, (chosen, attempt) in attempts.items():
        with _progress(name, len(chosen), quiet=quiet) as step:
            report["rewriters"][name] = score(chosen, attempt, step)
    report["phrases"] = phrases
    report["salience_cost"] = _cost(report["rewriters"]["deterministic"],
                                    report["rewriters"]["topic rules"])
    return report


def _cost(new: dict[str, Any], old: dict[str, Any]) -> dict[str, float | None]:
    """The deterministic rewriter's latency per turn over the rule path before it."""
    def ratio(field: str) -> float | None:
        return round(new[field] / old[field], 2) if new[field] and old[field] else None
    return {"p50_ratio": ratio("latency_p50_ms"), "p99_ratio": ratio("latency_p99_ms")}


def _phrase_finder(name: str) -> PhraseFinder:
    if name == "rules":
        return rule_phrases
    from threadline.rewrite import nlp

    nlp.pipeline()  # loaded before timing starts: a few seconds, once per process
    return nlp.spacy_phrases


def _print(report: dict[str, Any]) -> None:
    split = report["split"]
    click.echo(f"{report['file']}: {report['examples']} examples (the model alone: "
               f"{report['model_examples']})")
    click.echo(f"split: {split['name']} ({split['what']}; "
               f"{'tuned on' if split['tuned_on'] else 'not tuned on'})")
    click.echo(f"{'rewriter':<14} {'n':>5} {'recall':>7} {'prec':>7} {'no-op':>7} "
               f"{'preserve':>9} {'p50 ms':>9} {'p99 ms':>9} {'raw':>6}")
    for name, row in report["rewriters"].items():
        click.echo(f"{name:<14} {row['examples']:>5} {_num(row['resolution_recall']):>7} "
                   f"{_num(row['resolution_precision']):>7} "
                   f"{_num(row['noop_precision']):>7} {_num(row['must_preserve_retention']):>9}"
                   f" {_num(row['latency_p50_ms'], 1):>9} {_num(row['latency_p99_ms'], 1):>9}"
                   f" {_num(row['fallback_rate']):>6}")
    cost = report["salience_cost"]
    click.echo(f"noun phrases by {report['phrases']}; the salience step costs "
               f"{cost['p50_ratio']}x (p50) and {cost['p99_ratio']}x (p99) the topic rules' "
               f"latency per turn")


def _given(rewrites: dict[int, str]) -> Attempt:
    """Rewrites someone else made, read from the data (keyed by the example's identity)."""
    def attempt(example: Example) -> tuple[str, float, bool]:
        return rewrites[id(example)], 0.0, False
    return attempt


def _model_alone(run: Callable[..., str | None]) -> Attempt:
    """The model rewriter with no deadline and no validation: what it writes."""
    def attempt(example: Example) -> tuple[str, float, bool]:
        started = time.perf_counter()
        output = run(example.history, example.question, threading.Event())
        return output or example.question, (time.perf_counter() - started) * 1000, not output
    return attempt


def _raced(rewriters: list[Any], deadline: float) -> Attempt:
    def attempt(example: Example) -> tuple[str, float, bool]:
        result = race(rewriters, example.history, example.question, deadline_s=deadline)
        return result.rewritten, result.latency_ms, result.winner == "raw"
    return attempt


@contextlib.contextmanager
def _progress(name: str, total: int, *, quiet: bool) -> Iterator[Callable[[int], None] | None]:
    if quiet or not sys.stderr.isatty():
        if not quiet:
            click.echo(f"scoring {name} on {total} examples…", err=True)
        yield None
        return
    with click.progressbar(length=total, label=f"{name:<14}", file=sys.stderr) as bar:
        done = [0]

        def step(n: int) -> None:
            bar.update(n - done[0])
            done[0] = n
        yield step


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"
