"""``threadline eval``: threadline's parts on external benchmark files (``canard`` for the
rewrite hop, ``locomo`` for long-term memory, ``constraints`` for standing-constraint
detection on hand-annotated real conversations)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from threadline.cache.tokens import default_tokenizer
from threadline.cli._common import Context, json_option, output, pass_context
from threadline.cli.memory import RECALL_DENSE, RECALL_THRESHOLD
from threadline.cli.rewrite import canard
from threadline.compaction.constraint_classifier import ClassifiedDetector
from threadline.errors import InputError
from threadline.eval import constraints as constraint_eval
from threadline.eval.constraint_annotations import ANNOTATIONS, load
from threadline.eval.constraint_corpus import SPLITS, message_texts
from threadline.eval.locomo import evaluate, load_locomo, model_extraction
from threadline.memory.recall import K
from threadline.models import MODELS
from threadline.retrieval.dense import Embedder
from threadline.standard import constraint_detector


@click.group(name="eval")
def eval_() -> None:
    """Evaluate threadline's parts on external benchmark files."""


eval_.add_command(canard)


@eval_.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--k", "k", type=click.IntRange(1), default=K, show_default=True,
              help="Memories recalled per question.")
@click.option("--window", type=click.IntRange(1), default=20, show_default=True,
              help="Turns the last-N baseline keeps.")
@RECALL_THRESHOLD
@RECALL_DENSE
@click.option("--limit", type=click.IntRange(1), help="Only the first N samples.")
@click.option("--extract-model", "model_name", type=click.Choice(sorted(MODELS)),
              help="Also run this model's fact extractor and report how often its output "
                   "is schema-valid.")
@click.option("--extract-limit", type=click.IntRange(1), default=50, show_default=True,
              help="Turns the model extractor reads (it is slow on a CPU).")
@json_option()
@pass_context
def locomo(ctx: Context, file: Path, k: int, window: int, threshold: float | None,
           dense: bool, limit: int | None, model_name: str | None, extract_limit: int,
           as_json: bool) -> None:
    """Score memory recall on a file in LoCoMo's format: evidence recall@k and context tokens
    for threadline's recall, a last-N-turns window and the full conversation; abstention on
    adversarial questions; knowledge updates; recall latency against its raw query. Runs in a
    scratch store; the data directory is not touched."""
    samples = load_locomo(file)[:limit]
    tokenizer = default_tokenizer()

    def progress(line: str) -> None:
        click.echo(line, err=True)
    report = evaluate(samples, tokenizer, k=k, window=window, threshold=threshold,
                      embedder=Embedder() if dense else None, progress=progress).to_json()
    report = {"file": str(file), **report}
    if model_name is not None:
        report["model_extraction"] = model_extraction(samples, ctx.model(model_name),
                                                      limit=extract_limit, progress=progress)
    output(report, as_json, lambda: _print(report))


def _print(report: dict[str, Any]) -> None:
    def num(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"
    click.echo(f"{report['file']}: {report['samples']} samples, {report['turns']} turns, "
               f"{report['questions']} questions; k={report['k']}, last {report['window_turns']}"
               f" turns, threshold {report['threshold']}{', dense' if report['dense'] else ''},"
               f" tokens by {report['tokenizer']}")
    click.echo(f"{'arm':<11} {'recall@k':>9} {'tokens':>9} {'vs full':>8} {'abstain':>8} "
               f"{'false abstain':>14}")
    for name, arm in report["arms"].items():
        click.echo(f"{name:<11} {num(arm['evidence_recall_at_k']):>9} "
                   f"{arm['context_tokens_mean'] or 0:>9.1f} "
                   f"{num(arm['context_tokens_ratio_vs_full']):>8} "
                   f"{num(arm['abstention_rate']):>8} {num(arm['false_abstention_rate']):>14}")
    latency = report["latency"]
    click.echo(f"recall p50 {latency['recall_p50_ms']} ms, p95 {latency['recall_p95_ms']} ms;"
               f" raw query p50 {latency['raw_query_p50_ms']} ms, p95 "
               f"{latency['raw_query_p95_ms']} ms (ratios {latency['p50_ratio']}, "
               f"{latency['p95_ratio']})")
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
