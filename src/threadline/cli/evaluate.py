"""``threadline eval``: threadline's parts on external benchmark files (``canard`` and
``cast`` for the rewrite hop, ``locomo`` for long-term memory, ``constraints`` for
standing-constraint detection on hand-annotated real conversations, ``safety`` for the
trajectory monitor (``cli/eval_safety.py``), and whole
conversations: ``run``, ``report``, ``rescore`` and ``runs`` (``cli/eval_runs.py``),
``lic-logs`` (``cli/eval_logs.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from threadline.cache.tokens import default_tokenizer
from threadline.cli._common import Context, json_option, output, pass_context
from threadline.cli.eval_logs import lic_logs
from threadline.cli.eval_runs import COMMANDS
from threadline.cli.eval_safety import safety
from threadline.cli.memory import RECALL_DENSE, RECALL_THRESHOLD
from threadline.cli.rewrite_eval import canard, cast
from threadline.compaction.constraint_classifier import ClassifiedDetector
from threadline.errors import InputError
from threadline.eval import constraints as constraint_eval
from threadline.eval.constraint_annotations import ANNOTATIONS, load
from threadline.eval.constraint_corpus import SPLITS, message_texts
from threadline.eval.locomo import ArmSpec, evaluate, load_locomo, model_extraction
from threadline.eval.locomo_report import KS, split_of
from threadline.models import MODELS
from threadline.retrieval.dense import Embedder
from threadline.standard import constraint_detector


@click.group(name="eval")
def eval_() -> None:
    """Evaluate threadline's parts, and whole conversations (docs/eval.md)."""


eval_.add_command(canard)
eval_.add_command(cast)
for _command in (*COMMANDS, lic_logs, safety):
    eval_.add_command(_command)


@eval_.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--k", "ks", type=click.IntRange(1), multiple=True, default=KS,
              show_default=True, help="Evidence recall at k (repeat for several k).")
@click.option("--window", type=click.IntRange(1), default=20, show_default=True,
              help="Turns the last-N baseline keeps.")
@RECALL_THRESHOLD
@RECALL_DENSE
@click.option("--arms", default="all", show_default=True,
              help="Comma-separated ways to recall, each its steps joined by '+' (turns, "
                   "rerank, time, context, learned, beside, dense), 'rules' for the path before "
                   "them or 'all'; the first is reported as threadline.")
@click.option("--split", type=click.Choice(["dev", "test", "all"]), default="all",
              show_default=True,
              help="The samples to run: dev (LoCoMo conversations 1-2, which recall was "
                   "tuned on), test (every other sample) or all (each reported apart).")
@click.option("--limit", type=click.IntRange(1), help="Only the first N samples.")
@click.option("--extract-model", "model_name", type=click.Choice(sorted(MODELS)),
              help="Also run this model's fact extractor and report how often its output "
                   "is schema-valid.")
@click.option("--extract-limit", type=click.IntRange(1), default=50, show_default=True,
              help="Turns the model extractor reads (it is slow on a CPU).")
@json_option()
@pass_context
def locomo(ctx: Context, file: Path, ks: tuple[int, ...], window: int,
           threshold: float | None, dense: bool, arms: str, split: str, limit: int | None,
           model_name: str | None, extract_limit: int, as_json: bool) -> None:
    """Score memory recall on a file in LoCoMo's format: evidence recall@k by category and
    context tokens for threadline's recall, a last-N-turns window and the full conversation;
    abstention on adversarial questions; knowledge updates; recall latency against its raw
    query, by step. Every figure is reported per split. Runs in a scratch store; the data
    directory is not touched."""
    specs = [ArmSpec.parse(spec, dense=dense) for spec in arms.split(",") if spec.strip()]
    if not specs:
        raise InputError("--arms names no way to recall", hint="e.g. --arms all,rules")
    samples = [s for s in load_locomo(file)[:limit] if split in ("all", split_of(s.id))]
    if not samples:
        raise InputError(f"{file} has no {split} samples",
                         hint="dev is LoCoMo's conv-26 and conv-30; test is every other")
    tokenizer = default_tokenizer()

    def progress(line: str) -> None:
        click.echo(line, err=True)
    embedder = Embedder() if any(spec.dense for spec in specs) else None
    report = evaluate(samples, tokenizer, ks=ks, window=window, threshold=threshold,
                      arms=specs, embedder=embedder, progress=progress).to_json()
    report = {"file": str(file), **report}
    if model_name is not None:
        report["model_extraction"] = model_extraction(samples, ctx.model(model_name),
                                                      limit=extract_limit, progress=progress)
    output(report, as_json, lambda: _print(report))


def _print(report: dict[str, Any]) -> None:
    def num(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"
    ks = report["ks"]
    click.echo(f"{report['file']}: {report['samples']} samples, {report['turns']} turns, "
               f"{report['questions']} questions; threadline = {report['threadline']['steps']}"
               f", last {report['window_turns']} turns, tokens by {report['tokenizer']}")
    click.echo(f"split: dev {', '.join(report['split']['dev']) or '—'}; test "
               f"{', '.join(report['split']['test']) or '—'} ({report['split']['note']})")
    header = "".join(f" {'recall@' + str(k):>10}" for k in ks) + \
        "".join(f" {'tokens@' + str(k):>10} {'vs full':>8}" for k in ks)
    click.echo(f"{'split':<6} {'arm':<24}{header} {'abstain(5)':>11} {'false abst.':>11}")
    for name, arm in report["arms"].items():
        both = "dev" in arm and "test" in arm
        for split in (s for s in ("dev", "test", "all") if s in arm and (both or s != "all")):
            row = arm[split]
            cells = "".join(f" {num(row[f'recall@{k}']):>10}" for k in ks) + "".join(
                f" {row[f'tokens@{k}'] or 0:>10.1f} {num(row[f'tokens_vs_full@{k}']):>8}"
                for k in ks)
            click.echo(f"{split:<6} {name:<24}{cells} {num(row['adversarial_abstained']):>11}"
                       f" {num(row['false_abstention']):>11}")
            for category, figures in row["by_category"].items():
                if name not in ("last_n", "full"):
                    cells = "".join(f" {num(figures[f'recall@{k}']):>10}" for k in ks)
                    click.echo(f"{'':<6}   {category + ' (' + str(figures['questions']) + ')':<21}"
                               f"{cells}")
        if "latency" in arm:
            lat = arm["latency"]
            click.echo(f"       latency: recall p50 {lat['recall_p50_ms']} ms, p99 "
                       f"{lat['recall_p99_ms']} ms; raw query p50 {lat['raw_query_p50_ms']} "
                       f"ms, p99 {lat['raw_query_p99_ms']} ms (ratios {lat['p50_ratio']}, "
                       f"{lat['p99_ratio']}); steps p50 ms {lat['stages_p50_ms']}")
    click.echo(f"rewrite hop: {report['rewrite_hop']['questions_changed']} questions changed")
    updates = report["knowledge_updates"]
    click.echo(f"knowledge updates while reading: {updates['during_ingest']}")
    click.echo(f"knowledge updates, injected probes: {updates['injected_probes']}")
    click.echo(f"writer decisions: {report['writer']['decisions']}")
    if "model_extraction" in report:
        click.echo(f"model extraction: {report['model_extraction']}")


@eval_.command()
@click.option("--split", type=click.Choice(SPLITS), default="test", show_default=True,
              help="The annotation split to score (the rules were tuned on dev, the "
                   "classifier trained on it).")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path),
              default=Path("../shared/data"), show_default=True,
              help="The directory holding the ShareGPT, tau-bench and Lost in Conversation "
                   "files the annotations address.")
@click.option("--annotations", type=click.Path(dir_okay=False, path_type=Path),
              default=ANNOTATIONS, show_default="the annotations shipped with threadline",
              help="An annotation file in threadline's format.")
@click.option("--classifier/--no-classifier", default=None,
              help="Score the rules with the embedding classifier, or the rules alone. "
                   "Default: as THREADLINE_CONSTRAINT_CLASSIFIER says (on when the dense "
                   "extra is installed).")
@json_option()
@pass_context
def constraints(ctx: Context, split: str, data: Path, annotations: Path,
                classifier: bool | None, as_json: bool) -> None:
    """Score the standing-constraint detector on hand-annotated sentences of real user
    messages: precision, recall (with counts, and estimated for the whole corpus from the
    sampled non-candidates), recall per kind of rule, near-misses flagged, and the detector's
    time per message. Reads the data in place; writes nothing."""
    if not data.is_dir():
        raise InputError(f"{data} is not a directory",
                         hint="pass --data with the shared data directory (../shared/data)")
    annotated, strata = load(data, annotations)
    annotated = [a for a in annotated if a.sentence.split == split]  # only its messages run
    wanted = ctx.settings.constraint_classifier if classifier is None else classifier
    detect = constraint_detector(wanted)
    scored, ms = constraint_eval.flag(annotated, detect, message_texts(data))
    report = constraint_eval.score(scored, strata, split)
    messages = len({(s.annotated.sentence.file, s.annotated.sentence.conversation,
                     s.annotated.sentence.index) for s in scored})
    used = "rules + classifier" if isinstance(detect, ClassifiedDetector) and detect.active \
        else "rules"
    report = {"annotations": str(annotations), "data": str(data), "detector": used, **report,
              "detector_ms_per_message": round(ms / messages, 4) if messages else None}
    output(report, as_json, lambda: _print_constraints(report))


def _print_constraints(report: dict[str, Any]) -> None:
    est, raw = report["estimated"], report["annotated"]
    click.echo(f"split {report['split']}: {report['rules_annotated']} rules annotated; "
               f"detector: {report['detector']}")
    click.echo(f"precision {report['precision']}  recall {report['recall']}  f1 {report['f1']}")
    click.echo(f"annotated: tp {raw['tp']}, fp {raw['fp']}, fn {raw['fn']}, tn {raw['tn']}; "
               f"estimated for the corpus: tp {est['tp']}, fp {est['fp']}, fn {est['fn']}")
    for label, row in report["per_label_recall"].items():
        click.echo(f"  {label:<12} {row['found']:>4}/{row['rules']:<4} recall {row['recall']}")
    one_off = report["one_off"]
    click.echo(f"near-misses flagged: {one_off['flagged']}/{one_off['annotated']}; "
               f"{report['detector_ms_per_message']} ms per message")
