"""``threadline rewrite`` (a follow-up as a standalone query) and ``threadline eval canard``
(registered in ``cli/evaluate.py``)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from threadline.cli._common import (
    Context,
    branch_option,
    json_option,
    model_option,
    output,
    pass_context,
)
from threadline.eval.canard import Attempt, Example, load_canard, score, timed
from threadline.providers.query import rewrite as standalone_rewrite
from threadline.rewrite import DEFAULT_DEADLINE_S, DETERMINISTIC, race
from threadline.rewrite.deterministic import rewrite as carry
from threadline.rewrite.model import model_rewriter

_REWRITER = model_option("The model rewriter's backend.")
_DEADLINE = click.option("--deadline", type=click.FloatRange(0.001, 60), default=DEFAULT_DEADLINE_S,
                         show_default=True, help="Seconds before the raw message is used.")


@click.command()
@click.argument("text")
@click.option("--conversation", "conversation_id", required=True, metavar="ID")
@branch_option()
@_REWRITER
@click.option("--no-model", is_flag=True, help="Only the deterministic rewriter.")
@_DEADLINE
@json_option()
@pass_context
def rewrite(ctx: Context, text: str, conversation_id: str, branch: str,
            model_name: str | None, no_model: bool, deadline: float, as_json: bool) -> None:
    """Rewrite a follow-up into a standalone query, given a conversation.

    The query is what corpus search and memory recall use; nothing is saved."""
    store = ctx.store()
    store.conversation(conversation_id)
    store.head(conversation_id, branch)  # unknown ids fail before a model loads
    engine = ctx.engine(ctx.model("scripted" if no_model else model_name))
    result = standalone_rewrite(engine, conversation_id, text, branch, deadline_s=deadline,
                                use_model=not no_model)

    def human() -> None:
        click.echo(result.rewritten)
        why = f", raw because: {result.fallback}" if result.fallback else ""
        click.echo(f"[{result.winner}, {result.latency_ms:.1f} ms{why}; preserved: "
                   f"{', '.join(result.preserved) or 'nothing'}]", err=True)

    output(result.to_json(), as_json, human)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--limit", type=click.IntRange(1), help="Only the first N examples.")
@_REWRITER
@click.option("--model-limit", type=click.IntRange(0), default=100, show_default=True,
              help="Examples for the model rewriter alone (it is slow on a CPU); the race "
                   "runs on all. 0 skips both.")
@_DEADLINE
@json_option()
@pass_context
def canard(ctx: Context, file: Path, limit: int | None, model_name: str | None,
           model_limit: int, deadline: float, as_json: bool) -> None:
    """Score the rewriters on a file in CANARD's format (History, Question, Rewrite)."""
    examples = load_canard(file)[:limit]
    subset = examples[:model_limit]
    attempts: dict[str, tuple[list[Example], Attempt]] = {
        "raw": (examples, timed(lambda history, text: text)),
        "deterministic": (examples, timed(carry)),
    }
    if subset:
        engine = ctx.engine(ctx.model(model_name))
        model = model_rewriter(engine.model, engine.model_lock)
        alone = model_rewriter(engine.model, engine.model_lock, hedge_s=0)
        attempts["model"] = (subset, _model_alone(alone.run))
        attempts["race"] = (examples, _raced([DETERMINISTIC, model], deadline))
    report: dict[str, Any] = {"file": str(file), "examples": len(examples),
                              "deadline_s": deadline, "rewriters": {}}
    for name, (chosen, attempt) in attempts.items():
        with _progress(name, len(chosen), quiet=as_json) as step:
            report["rewriters"][name] = score(chosen, attempt, step)
    output(report, as_json, lambda: _print_canard(report, len(subset)))


def _print_canard(report: dict[str, Any], model_examples: int) -> None:
    click.echo(f"{report['file']}: {report['examples']} examples (the model alone: "
               f"{model_examples})")
    click.echo(f"{'rewriter':<14} {'n':>5} {'recall':>7} {'no-op':>7} {'preserve':>9} "
               f"{'p50 ms':>9} {'p99 ms':>9} {'raw':>6}")
    for name, row in report["rewriters"].items():
        click.echo(f"{name:<14} {row['examples']:>5} {_num(row['resolution_recall']):>7} "
                   f"{_num(row['noop_precision']):>7} {_num(row['must_preserve_retention']):>9}"
                   f" {_num(row['latency_p50_ms'], 1):>9} {_num(row['latency_p99_ms'], 1):>9}"
                   f" {_num(row['fallback_rate']):>6}")


def _model_alone(run: Callable[..., str | None]) -> Attempt:
    """The model rewriter with no deadline and no validation: what it writes."""
    import threading

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
