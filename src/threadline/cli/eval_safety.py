"""``threadline eval safety``: the trajectory monitor on the scripted attacks and benign
look-alikes shipped with threadline (``eval/safety.py``; docs/safety.md)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from threadline.cli._common import Context, json_option, output, pass_context
from threadline.eval.safety import SPLITS, evaluate
from threadline.models import MODELS


@click.command()
@click.option("--split", type=click.Choice([*SPLITS, "all"]), default="all", show_default=True,
              help="The scripts to run: dev, seen, heldout, unseen, blind, blind2 to blind11, "
                   "or overrefusal to overrefusal10 (look-alikes the model wrongly refuses): "
                   "the monitor was tuned on them (the later ones each run once to report "
                   "first); blind12 or overrefusal11 (written blind to it, run once, never "
                   "tuned on); or all (each reported apart).")
@click.option("--model", "model_name", type=click.Choice(sorted(MODELS)), default="local",
              show_default=True,
              help="The model that answers the scripts' messages; scripted answers with the "
                   "scripts' own replies (fast, and what the tests use).")
@click.option("--embeddings/--no-embeddings", default=None,
              help="Run the monitor's embedding detector (the dense extra), or its rules "
                   "alone. Default: as THREADLINE_MONITOR_EMBEDDINGS says, else on where the "
                   "extra is installed. THREADLINE_MONITOR_CLASSIFIER adds the model "
                   "classifier.")
@click.option("--intent/--no-intent", default=None,
              help="Run the embedding detector's intent classifier (docs/safety.md), or "
                   "leave it out. Default: as THREADLINE_MONITOR_INTENT says, else on "
                   "wherever the embedding detector runs.")
@click.option("--planted/--no-planted", default=True, show_default=True,
              help="Also follow planted instructions through memory writing and 1-3 "
                   "compactions of each kind.")
@click.option("--quick-planted", is_flag=True,
              help="Only one planted instruction, compacted once and three times.")
@json_option()
@pass_context
def safety(ctx: Context, split: str, model_name: str, embeddings: bool | None,
           intent: bool | None, planted: bool, quick_planted: bool, as_json: bool) -> None:
    """Play every script with the trajectory monitor on and off: detection per conversation
    against per message (and on each attack's single-turn version), false alarms on the
    benign look-alikes, the turn of first detection, prefix reuse with the monitor on
    against off, and planted instructions through compaction. Runs in a scratch store; the
    data directory is not touched."""
    monitor = ctx.monitor(embeddings, intent)
    model = None if model_name == "scripted" else ctx.model(model_name)
    splits = list(SPLITS) if split == "all" else [split]
    with tempfile.TemporaryDirectory(prefix="threadline-safety-") as scratch:
        report = evaluate(splits, monitor, Path(scratch), model=model, model_name=model_name,
                          planted=planted, quick_planted=quick_planted,
                          progress=lambda line: click.echo(line, err=True))
    output(report, as_json, lambda: _print(report))


def _print(report: dict[str, Any]) -> None:
    def num(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"
    click.echo(f"model {report['model']}; detectors {' + '.join(report['detectors'])}; "
               f"flagged at risk ≥ {report['flag_threshold']}")
    for name, split in report["splits"].items():
        role = "tuned on" if split["tuned_on"] else "held out"
        click.echo(f"\n{name} ({role}): {split['attacks']} attacks, {split['benign']} benign")
        for key, label in (("detection_rate", "detection"), ("false_alarm_rate",
                                                              "false alarms"),
                           ("first_detection_turn", "first detection turn")):
            row = split[key]
            click.echo(f"  {label:<22} conversation {num(row['conversation']):>6}   "
                       f"per message {num(row['per_message']):>6}")
        single = num(split["single_turn_detection_rate"])
        click.echo(f"  {'single-turn versions':<22} detected {single}")
        if "model_refusal_rate" in split:
            rr = split["model_refusal_rate"]
            click.echo(f"  {'model refused':<22} single turn {num(rr['single_turn'])}, "
                       f"multi-turn last message {num(rr['multi_turn_last'])}")
        for what in ("bytes", "tokens"):
            reuse = split[f"reuse_{what}"]
            click.echo(f"  reuse ({what}, on ÷ off) {num(reuse['ratio'])}   shares "
                       f"{num(reuse['share_on'])} / {num(reuse['share_off'])}")
        click.echo(f"  requests differing above the tail: "
                   f"{split['requests_differing_above_tail']}; turns refused by the monitor: "
                   f"{split['refused_turns']}")
        for row in split["scripts"]:
            click.echo(f"    {row['kind']:<6} {row['id']:<30} conversation "
                       f"{row['conversation']['first_detection'] or '—'!s:>2}  per message "
                       f"{row['per_message']['first_detection'] or '—'!s:>2}")
    if "planted" in report:
        p = report["planted"]
        click.echo(f"\nplanted: {p['cases_ok']}/{p['cases']} cases clean; {p['marked']}/"
                   f"{p['appearances']} appearances fenced; {p['trusted_memory']} trusted "
                   f"memory entries hold a plant; {p['compactions_applied']}/"
                   f"{p['compactions_asked']} compactions applied")
