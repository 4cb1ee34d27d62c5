"""``threadline eval run|report|rescore|runs``: multi-turn evaluation runs (docs/eval.md);
``report`` and ``rescore`` read N-1 runs (``eval n1``, ``cli/eval_n1.py``) too."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from threadline.cli._common import Context, json_option, output, pass_context, table
from threadline.cli.eval_n1 import is_n1, n1, n1_tables, score_n1
from threadline.errors import InputError
from threadline.eval.multiturn import backends
from threadline.eval.multiturn.config import load_config
from threadline.eval.multiturn.plots import write_plots
from threadline.eval.multiturn.records import (
    MANIFEST,
    REPORT,
    TrialRecord,
    list_runs,
    read_run,
    resolve_run,
    write_json,
)
from threadline.eval.multiturn.runner import plan, run, simulator_for
from threadline.eval.multiturn.tasks import load_tasks, select
from threadline.items import utc_now


def _root(ctx: Context) -> Path:
    return ctx.settings.home / "eval"


@click.command(name="run")
@click.argument("config_file", metavar="CONFIG", type=click.Path(dir_okay=False,
                                                                 path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory. Default: THREADLINE_HOME/eval/RUN_ID.")
@click.option("--id", "run_id", help="The run's id (default: run.id, else the time and the "
                                     "config's digest).")
@json_option("Print the report as JSON.")
@pass_context
def run_(ctx: Context, config_file: Path, out: Path | None, run_id: str | None,
         as_json: bool) -> None:
    """Run an evaluation CONFIG (TOML): every task, condition, arm and trial as a recorded
    conversation in the run's own store, then its report, tables and plots."""
    config = load_config(config_file)
    tasks, skipped = load_tasks(config.tasks)
    chosen = select(tasks, kinds=config.kinds, ids=config.ids, limit=config.limit)
    if not chosen:
        raise InputError(f"{config_file}: the filter (run.kinds, run.ids, run.limit) keeps no "
                         f"task of the {len(tasks)} gradable ones in {config.tasks}; nothing "
                         "was run")
    name = run_id or config.run_id or \
        f"{utc_now():%Y%m%d-%H%M%S}-{config.digest.removeprefix('b2:')[:8]}"
    run_dir = out or _root(ctx) / name
    if (run_dir / MANIFEST).exists():
        raise InputError(f"{run_dir} already holds a run; nothing was run",
                         hint="give the run another id (run.id or --id), or another --out")
    model = backends.build(ctx.settings, config.model)  # a missing model fails here
    own = None
    if config.simulator.backend not in (None, config.model.backend):
        own = backends.build(ctx.settings, backends.ModelConfig(
            config.simulator.backend, config.model.reply_tokens, config.model.temperature))
    the_plan = plan(config, chosen)
    with click.progressbar(length=the_plan.trials, label="trials", file=sys.stderr) as bar:
        def progress(record: TrialRecord) -> None:
            bar.update(1)
        run(config, run_dir, the_plan, model, simulator_for(config, model, own),
            skipped=skipped, progress=progress)
    report = _score(run_dir)
    output(report, as_json, lambda: click.echo(tables(report) + f"\nrun directory: {run_dir}"))


def tables(report: dict[str, Any]) -> str:
    if report.get("kind") == "n1":
        return n1_tables(report)
    from threadline.eval.multiturn.report import tables as render
    return render(report)


def _score(run_dir: Path) -> dict[str, Any]:
    """The run's report from its store (no model call), written with its tables and plots."""
    if is_n1(run_dir):
        return score_n1(run_dir)
    try:  # numpy: the eval extra, needed only here
        from threadline.eval.multiturn.report import build_report
    except ImportError as err:
        raise InputError(f"the report needs {err.name}, which is not installed",
                         hint="pip install 'threadline[eval]'") from err
    the_run = read_run(run_dir)
    with click.progressbar(length=len(the_run.trials), label="grading",
                           file=sys.stderr) as bar:
        report = build_report(the_run, progress=bar.update)
    write_json(run_dir / REPORT, report)
    (run_dir / "tables.txt").write_text(tables(report), "utf-8")
    try:
        write_plots(report, run_dir / "plots")
    except InputError as err:  # the report stands without its plots
        click.echo(f"warning: no plots: {err}", err=True)
    return report


def _digest(report: dict[str, Any]) -> str:
    text = json.dumps(report, sort_keys=True, ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


@click.command()
@click.argument("run_name", metavar="RUN")
@json_option()
@pass_context
def report(ctx: Context, run_name: str, as_json: bool) -> None:
    """Print a run's report (RUN: its id or its directory); computed from the run's store
    if the run has none yet."""
    run_dir = resolve_run(_root(ctx), run_name)
    path = run_dir / REPORT
    found = json.loads(path.read_text("utf-8")) if path.exists() else _score(run_dir)
    output(found, as_json, lambda: click.echo(tables(found), nl=False))


@click.command()
@click.argument("run_name", metavar="RUN")
@json_option()
@pass_context
def rescore(ctx: Context, run_name: str, as_json: bool) -> None:
    """Grade a run again from its log with today's graders and recompute every metric, table
    and plot; no model is called. Says whether the report came out identical."""
    run_dir = resolve_run(_root(ctx), run_name)
    path = run_dir / REPORT
    before = json.loads(path.read_text("utf-8")) if path.exists() else None
    after = _score(run_dir)
    same = before is not None and _digest(before) == _digest(after)
    trials = after["replies"] if after.get("kind") == "n1" else after["trials"]
    summary = {"run": after["run"], "trials": trials, "changed": after["changed"],
               "identical": same, "report": after}
    output(summary, as_json, lambda: click.echo(
        tables(after) + f"\nre-scored {trials} {'replies' if 'replies' in after else 'trials'}"
        " without a model call: "
        f"{after['changed']} changed grade; the report is "
        f"{'identical' if same else 'different' if before else 'new'}"))


@click.command()
@json_option()
@pass_context
def runs(ctx: Context, as_json: bool) -> None:
    """List the evaluation runs under THREADLINE_HOME/eval, newest first."""
    found = list_runs(_root(ctx))
    output(found, as_json, lambda: table(
        [[r["id"], r["status"], r["started_at"] or "", str(r["model"]),
          ",".join(r["conditions"] or []), str(r["tasks"]), str(r["k"]), str(r["trials"])]
         for r in found], ["id", "status", "started", "model", "conditions", "tasks", "k",
                           "trials"]) if found else click.echo("no evaluation runs"))


COMMANDS = (run_, n1, report, rescore, runs)
