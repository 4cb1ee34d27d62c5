"""``threadline eval n1 CONFIG``: N-1 replay of real transcripts under two settings, A and B,
scored with rubrics derived from each conversation (docs/eval.md). ``eval report``,
``rescore`` and ``runs`` read its runs as they read the others."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from threadline.cli._common import Context, json_option, output, pass_context
from threadline.errors import InputError
from threadline.eval.multiturn import backends
from threadline.eval.multiturn.judges import Judge, ModelJudge, NoJudge
from threadline.eval.multiturn.n1 import ReplyRecord, run, with_rubrics
from threadline.eval.multiturn.n1_config import N1Config, load_n1_config
from threadline.eval.multiturn.n1_transcripts import choose, read_transcripts
from threadline.eval.multiturn.records import MANIFEST, REPORT, write_json
from threadline.items import utc_now

JUDGE_TOKENS = 4  # "Yes" or "No", and a little room


def is_n1(run_dir: Path) -> bool:
    try:
        return bool(json.loads((run_dir / MANIFEST).read_text("utf-8")).get("kind") == "n1")
    except (OSError, ValueError):
        return False


def score_n1(run_dir: Path) -> dict[str, Any]:
    """The N-1 run's report from its store and log (no model call), written with its
    tables."""
    try:  # numpy: the eval extra, needed only here
        from threadline.eval.multiturn.n1_report import build_n1_report, n1_tables
    except ImportError as err:
        raise InputError(f"the report needs {err.name}, which is not installed",
                         hint="pip install 'threadline[eval]'") from err
    from threadline.eval.multiturn.n1_report import read_n1_run
    replies = len(read_n1_run(run_dir)[2])
    with click.progressbar(length=replies, label="grading", file=sys.stderr) as bar:
        report = build_n1_report(run_dir, progress=bar.update)
    write_json(run_dir / REPORT, report)
    (run_dir / "tables.txt").write_text(n1_tables(report), "utf-8")
    return report


def n1_tables(report: dict[str, Any]) -> str:
    from threadline.eval.multiturn.n1_report import n1_tables as render
    return render(report)


def _judge(ctx: Context, config: N1Config) -> Judge:
    if config.judge == NoJudge.name:
        return NoJudge()
    built = backends.build(ctx.settings, backends.ModelConfig(
        config.judge_backend or config.model.backend, JUDGE_TOKENS, 0.0))
    return ModelJudge(built.model)


@click.command(name="n1")
@click.argument("config_file", metavar="CONFIG", type=click.Path(dir_okay=False,
                                                                 path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory. Default: THREADLINE_HOME/eval/RUN_ID.")
@click.option("--id", "run_id", help="The run's id (default: n1.id, else the time and the "
                                     "config's digest).")
@json_option("Print the report as JSON.")
@pass_context
def n1(ctx: Context, config_file: Path, out: Path | None, run_id: str | None,
       as_json: bool) -> None:
    """Replay real transcripts N-1 (CONFIG: TOML): every turn but the last fixed, the last
    reply generated through the engine under settings A and B, each held to a rubric of
    yes/no items derived from the conversation's standing constraints (graded by rule, and
    by a judge if the config names one); then the paired report."""
    config = load_n1_config(config_file)
    read = read_transcripts(config.transcripts, config.format)
    usable, left = choose(read.transcripts, split=config.split, ids=config.ids,
                          min_turns=config.min_turns, max_chars=config.max_chars)
    chosen, unruled = with_rubrics(usable, require=config.require,
                                   max_items=config.max_items, limit=config.limit)
    if not chosen:
        raise InputError(f"{config_file}: of the {len(read.transcripts)} transcripts in "
                         f"{config.transcripts}, none is left by the filter (n1.split, ids, "
                         f"min_turns, max_chars, require); nothing was run",
                         hint=f"left out: {dict(left) | {'no rubric': unruled}}")
    name = run_id or config.run_id or \
        f"{utc_now():%Y%m%d-%H%M%S}-{config.digest.removeprefix('b2:')[:8]}"
    run_dir = out or ctx.settings.home / "eval" / name
    if (run_dir / MANIFEST).exists():
        raise InputError(f"{run_dir} already holds a run; nothing was run",
                         hint="give the run another id (n1.id or --id), or another --out")
    model = backends.build(ctx.settings, config.model)  # a missing model fails here
    judge = _judge(ctx, config)
    selection = {"transcripts": str(config.transcripts), "format": config.format,
                 "split": config.split, "read": len(read.transcripts),
                 "unreadable_or_unusable": dict(read.skipped), "left_out": dict(left),
                 "no_rubric": unruled, "chosen": len(chosen), "limit": config.limit,
                 "require": config.require, "min_turns": config.min_turns,
                 "max_chars": config.max_chars, "max_items": config.max_items}
    with click.progressbar(length=2 * len(chosen), label="replies", file=sys.stderr) as bar:
        def progress(record: ReplyRecord) -> None:
            bar.update(1)
        run(config, run_dir, chosen, model, judge, selection=selection, progress=progress)
    report = score_n1(run_dir)
    output(report, as_json, lambda: click.echo(n1_tables(report)
                                               + f"\nrun directory: {run_dir}"))
