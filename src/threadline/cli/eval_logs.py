"""``threadline eval lic-logs``: the graders checked against Lost in Conversation's logs."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from threadline.cli._common import json_option, output
from threadline.eval.multiturn.lic_logs import read_logs, validate
from threadline.eval.multiturn.tasks import load_tasks


@click.command(name="lic-logs")
@click.argument("paths", metavar="LOG...", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tasks", "tasks_file", type=click.Path(exists=True, dir_okay=False,
                                                       path_type=Path),
              help="A sharded-instructions file: tasks found in it are graded against their "
                   "own reference (the others against what the logs accepted, leave-one-out).")
@json_option()
def lic_logs(paths: tuple[Path, ...], tasks_file: Path | None, as_json: bool) -> None:
    """Re-grade Lost in Conversation's logged conversations (sim_logs_*.jsonl) with
    threadline's extraction, classifier and graders, and report the agreement with the
    logged grades, every class of disagreement, and each model's FULL → SHARDED drop."""
    started = time.perf_counter()
    logs, skipped = read_logs(list(paths))
    tasks = load_tasks(tasks_file)[0] if tasks_file is not None else []
    with click.progressbar(length=len(logs), label="re-grading", file=sys.stderr) as bar:
        report = validate(logs, tasks, progress=bar.update)
    report["skipped"] = dict(skipped)
    report["seconds"] = round(time.perf_counter() - started, 3)
    output(report, as_json, lambda: _print(report))


def _print(report: dict[str, Any]) -> None:
    def pct(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"
    click.echo(f"{report['conversations']} conversations re-graded in {report['seconds']} s")
    for kind, found in report["kinds"].items():
        sources = sorted(set(found["references"].values()))
        click.echo(f"\n{kind}: {found['conversations']} conversations, "
                   f"{found['evaluations']} graded answers; references: {', '.join(sources)}")
        click.echo("  agreement with the logged grades: answers "
                   f"{pct(found['evaluation_agreement'])}, grader alone "
                   f"{pct(found['grader_agreement'])}, runs "
                   f"{pct(found['run_agreement'])}, answer-attempt labels "
                   f"{pct(found['classification_agreement'])}")
        click.echo("  answers graded differently:")
        for item in found["disagreements"]:
            click.echo(f"  {item['count']:>5}  {item['class']} (e.g. {item['example']})")
        click.echo("  conversations graded differently:")
        for item in found["run_disagreements"]:
            click.echo(f"  {item['count']:>5}  {item['class']} (e.g. {item['example']})")
        click.echo(f"  FULL → SHARDED drop (logged grades): mean {pct(found['mean_drop_log'])};"
                   f" {found['models_dropping']} of {found['models']} models drop")
        for row in found["full_to_sharded"]:
            log, ours = row.get("log"), row.get("ours")
            if log and ours:
                click.echo(f"    {row['model']:<22} log {log['full']:.2f} → {log['sharded']:.2f}"
                           f"  ours {ours['full']:.2f} → {ours['sharded']:.2f}")
