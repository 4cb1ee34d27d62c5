"""An N-1 run's report, recomputed from what the run recorded: no model is called.

Each transcript's rubric is derived again by today's rules (``rubrics.derive``), each reply
read back from the run's store and graded again by rule; a judge's verdicts are the answers
recorded while running, matched to today's items by their question (an item the judge was
never asked has no judge verdict). An item counts by its rule where it has one, else by
the judge. ``changed`` counts the replies with any verdict different from the one given
while running.

Figures, each with a bootstrap interval over transcripts (the run's seed and the figure's
name seed the generator, so a report is the same every time):

    pass rate         items passed over items graded, pooled, per setting, per rubric kind
    all pass          the share of transcripts whose graded items all pass
    paired difference B's pass rate minus A's over the items graded in both, resampling
                      transcripts (their items stay together); the sign test on each
                      transcript's share (B higher, A higher, ties left out) and McNemar's
                      exact test on all-pass; over every item, and over the items a rule
                      graded (``paired_rules``: no judge verdict in it)
    judge agreement   on the items graded both by rule and by the judge
    original          the transcript's own reply to its last message, by rule: what the
                      rubric makes of the reply that was actually given
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from threadline.errors import InputError, NotFound
from threadline.eval.multiturn.metrics import (
    Array,
    bootstrap,
    mean_of,
    paired_rate_difference,
    pooled_rate,
    sign_test,
)
from threadline.eval.multiturn.n1 import CONVERSATIONS, REPLIES, ReplyRecord, grades
from threadline.eval.multiturn.n1_transcripts import Transcript
from threadline.eval.multiturn.records import MANIFEST, STORE
from threadline.eval.multiturn.rubrics import RUBRIC_VERSION, RubricItem, derive
from threadline.settings import Durability
from threadline.stores.sqlite import SQLiteStore

Graded = list[dict[str, Any]]


def read_n1_run(run_dir: Path) -> tuple[dict[str, Any], list[Transcript],
                                        list[ReplyRecord]]:
    if not (run_dir / MANIFEST).is_file():
        raise NotFound(f"{run_dir} is not an evaluation run (it has no {MANIFEST})",
                       hint="list the runs with: threadline eval runs")
    try:
        manifest = json.loads((run_dir / MANIFEST).read_text("utf-8"))
        transcripts = [Transcript.from_json(t) for t in
                       json.loads((run_dir / CONVERSATIONS).read_text("utf-8"))]
        path = run_dir / REPLIES
        lines = path.read_text("utf-8").splitlines() if path.exists() else []
        replies = [ReplyRecord.from_json(json.loads(line)) for line in lines if line.strip()]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"{run_dir} is damaged: {type(err).__name__}: {err}") from err
    return manifest, transcripts, replies


def build_n1_report(run_dir: Path, *,
                    progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    manifest, transcripts, replies = read_n1_run(run_dir)
    max_items = manifest["selection"]["max_items"]
    rubrics = {t.id: derive(t.user_turns, max_items=max_items) for t in transcripts}
    by_id = {t.id: t for t in transcripts}
    names = [s["name"] for s in manifest["arms"]]
    graded: dict[str, dict[str, Graded]] = {name: {} for name in names}
    usage: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    changed = 0
    store = SQLiteStore(run_dir / STORE, durability=Durability.NORMAL)
    try:
        for record in replies:
            rubric = rubrics[record.transcript]
            text = None
            if record.error is None and record.conversation_id and record.reply_seq:
                text = store.item(record.conversation_id, record.reply_seq).text or ""
                call = store.call(record.call_id) if record.call_id else None
                if call is not None:
                    usage[record.setting].append({
                        "prompt": call.usage.prompt_tokens,
                        "cached": call.usage.cached_tokens or 0,
                        "completion": call.usage.completion_tokens or 0,
                        "truncated": call.response.get("finish_reason") == "length"})
            now = grades(rubric, text, record.judged)
            before = {(g["key"], g["passed"]) for g in record.graded}
            changed += before != {(g["key"], g["passed"]) for g in now}
            graded[record.setting][record.transcript] = now
            if progress is not None:
                progress(1)
    finally:
        store.close()
    seed, settings = manifest["seed"], manifest["metrics"]
    opts = {"seed": seed, "resamples": settings["bootstrap"],
            "confidence": settings["confidence"]}
    a, b = names
    ids = [t.id for t in transcripts if t.id in graded[a] and t.id in graded[b]]
    kinds = sorted({item.kind for r in rubrics.values() for item in r})
    return {
        "kind": "n1", "run": manifest["id"], "model": manifest["model"],
        "judge": manifest["judge"], "rubric_version": RUBRIC_VERSION,
        "selection": manifest["selection"], "settings": manifest["arms"],
        "transcripts": len(transcripts), "replies": len(replies),
        "errors": sum(1 for r in replies if r.error), "changed": changed,
        "paired_transcripts": len(ids),
        "by_setting": {name: _setting(name, [graded[name][i] for i in graded[name]],
                                      usage[name], opts) for name in names},
        "paired": _paired([graded[a][i] for i in ids], [graded[b][i] for i in ids],
                          "all", opts),
        "paired_rules": _paired([_ruled(graded[a][i]) for i in ids],
                                [_ruled(graded[b][i]) for i in ids], "all by rule", opts),
        "by_kind": [_paired([_of(graded[a][i], kind, rubrics[i]) for i in ids],
                            [_of(graded[b][i], kind, rubrics[i]) for i in ids], kind, opts)
                    for kind in kinds],
        "original": _original(by_id, rubrics, opts),
    }


def _of(graded: Graded, kind: str, rubric: Sequence[RubricItem]) -> Graded:
    keys = {item.key for item in rubric if item.kind == kind}
    return [g for g in graded if g["key"] in keys]


def _ruled(graded: Graded) -> Graded:
    """Only the items a rule graded (a judge's verdicts left out)."""
    return [g for g in graded if g["rule"] is not None]


def _counts(graded: Graded) -> tuple[int, int]:
    done = [g["passed"] for g in graded if g["passed"] is not None]
    return sum(done), len(done)


def _estimate(rows: Array, stat: Callable[[Array], Array], name: str,
              opts: dict[str, Any]) -> dict[str, float] | None:
    found = bootstrap(rows, stat, name=name, **opts)
    return None if found is None else found.to_json()


def _setting(name: str, replies: Sequence[Graded], usage: Sequence[dict[str, Any]],
             opts: dict[str, Any]) -> dict[str, Any]:
    counts = np.array([_counts(g) for g in replies], dtype=np.float64).reshape(-1, 2)
    full = np.array([[1.0 if n and p == n else 0.0] for p, n in counts], dtype=np.float64
                    ).reshape(-1, 1)
    checked = [g for graded in replies for g in graded if g["rule"] is not None
               and g["judge"] is not None]
    prompt = sum(u["prompt"] for u in usage)
    return {
        "items": sum(len(g) for g in replies), "graded": int(counts[:, 1].sum()),
        "passed": int(counts[:, 0].sum()),
        "pass_rate": _estimate(counts, pooled_rate, f"{name}/pass", opts),
        "all_pass": _estimate(full[counts[:, 1] > 0], mean_of, f"{name}/all", opts),
        "judge_agreement": {
            "items": len(checked),
            "agree": round(sum(g["rule"] == g["judge"] for g in checked) / len(checked), 4)
            if checked else None,
            "judge_yes": round(sum(bool(g["judge"]) for g in checked) / len(checked), 4)
            if checked else None,
            "rule_yes": round(sum(bool(g["rule"]) for g in checked) / len(checked), 4)
            if checked else None},
        "tokens": {"prompt": prompt, "cached": sum(u["cached"] for u in usage),
                   "completion": sum(u["completion"] for u in usage),
                   "reuse_ratio": round(sum(u["cached"] for u in usage) / prompt, 4)
                   if prompt else None,
                   "truncated": sum(u["truncated"] for u in usage)},
    }


def _paired(a: Sequence[Graded], b: Sequence[Graded], kind: str,
            opts: dict[str, Any]) -> dict[str, Any]:
    """A against B on each transcript's items graded under both."""
    rows, wins, losses, only_a, only_b = [], 0, 0, 0, 0
    for one, two in zip(a, b, strict=True):
        theirs = {g["key"]: g["passed"] for g in two}
        both = [(g["passed"], theirs[g["key"]]) for g in one
                if g["passed"] is not None and theirs.get(g["key"]) is not None]
        if not both:
            continue
        pa, pb, n = sum(x for x, _ in both), sum(y for _, y in both), len(both)
        rows.append((pa, n, pb, n))
        wins += pb > pa
        losses += pa > pb
        only_a += pa == n and pb < n
        only_b += pb == n and pa < n
    values = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return {
        "kind": kind, "transcripts": len(rows), "items": int(values[:, 1].sum()),
        "a": _estimate(values[:, :2], pooled_rate, f"{kind}/a", opts),
        "b": _estimate(values[:, 2:], pooled_rate, f"{kind}/b", opts),
        "difference": _estimate(values, paired_rate_difference, f"{kind}/b-a", opts),
        "sign_test": {"b_higher": wins, "a_higher": losses,
                      "ties": len(rows) - wins - losses,
                      "p": round(sign_test(wins, losses), 4)},
        "mcnemar_all_pass": {"only_b": only_b, "only_a": only_a,
                             "p": round(sign_test(only_b, only_a), 4)},
    }


def _original(transcripts: dict[str, Transcript], rubrics: dict[str, list[RubricItem]],
              opts: dict[str, Any]) -> dict[str, Any]:
    """The transcripts' own replies, by rule (no judge was asked about them)."""
    per_kind: dict[str, list[tuple[int, int]]] = defaultdict(list)
    rows = []
    for ident, transcript in transcripts.items():
        if transcript.original is None:
            continue
        graded = [g for g in grades(rubrics[ident], transcript.original, [])
                  if g["rule"] is not None]
        rows.append(_counts(graded))
        for item in rubrics[ident]:
            found = [g for g in graded if g["key"] == item.key]
            if found:
                per_kind[item.kind].append(_counts(found))
    values = np.array(rows, dtype=np.float64).reshape(-1, 2)
    return {"transcripts": len(rows), "items": int(values[:, 1].sum()),
            "pass_rate": _estimate(values, pooled_rate, "original", opts),
            "by_kind": {kind: {"items": sum(n for _, n in found),
                               "pass_rate": round(sum(p for p, _ in found)
                                                  / max(sum(n for _, n in found), 1), 4)}
                        for kind, found in sorted(per_kind.items())}}


def n1_tables(report: dict[str, Any]) -> str:
    """The report as plain-text tables."""
    def cell(value: dict[str, float] | None, signed: bool = False) -> str:
        if not value:
            return "—"
        f = "+.3f" if signed else ".3f"
        return f"{value['value']:{f}} [{value['low']:{f}}, {value['high']:{f}}]"
    a, b = (s["name"] for s in report["settings"])
    judge = report["judge"]
    selection = report["selection"]
    lines = [f"N-1 run {report['run']}: {report['model']['model']}, judge "
             f"{judge['name']}{' (' + judge['model'] + ')' if judge.get('model') else ''}, "
             f"{report['transcripts']} transcripts ({selection['split']} split), "
             f"{report['replies']} replies, {report['errors']} failed, {report['changed']} "
             f"changed on re-grading",
             f"A = {a}, B = {b}", ""]
    head = f"{'rubric kind':<14} {'pairs':>5} {'items':>5}  {'A pass rate':<22} " \
           f"{'B pass rate':<22} {'B - A':<25} {'sign p':>6}"
    lines += [head, "-" * len(head)]
    for row in [*report["by_kind"], report["paired"], report["paired_rules"]]:
        if row["kind"] == "all":
            lines.append("-" * len(head))
        lines.append(f"{row['kind']:<14} {row['transcripts']:>5} {row['items']:>5}  "
                     f"{cell(row['a']):<22} {cell(row['b']):<22} "
                     f"{cell(row['difference'], True):<25} {row['sign_test']['p']:>6.3f}")
    paired = report["paired"]
    mc, sign = paired["mcnemar_all_pass"], paired["sign_test"]
    lines += ["", f"per transcript: B higher {sign['b_higher']}, A higher {sign['a_higher']}, "
                  f"ties {sign['ties']} (sign test p = {sign['p']}); all items pass only under "
                  f"B {mc['only_b']}, only under A {mc['only_a']} (McNemar exact p = "
                  f"{mc['p']})", ""]
    for name in (a, b):
        row = report["by_setting"][name]
        agree, tokens = row["judge_agreement"], row["tokens"]
        reuse = "—" if tokens["reuse_ratio"] is None else f"{tokens['reuse_ratio']:.3f}"
        lines.append(f"{name}: {row['passed']}/{row['graded']} items pass ({row['items']} "
                     f"in the rubrics), all pass {cell(row['all_pass'])}; reuse {reuse}, "
                     f"{tokens['truncated']} replies cut at the length cap")
        if agree["items"]:
            lines.append(f"  judge vs rule on {agree['items']} items: agree {agree['agree']}, "
                         f"judge says yes {agree['judge_yes']}, rule {agree['rule_yes']}")
    original = report["original"]
    lines += ["", f"original replies (by rule): {cell(original['pass_rate'])} over "
                  f"{original['items']} items of {original['transcripts']} transcripts"]
    lines += [f"  {kind}: {row['pass_rate']:.3f} of {row['items']}"
              for kind, row in original["by_kind"].items()]
    return "\n".join(lines) + "\n"
