"""A run's report, recomputed from what the run recorded: no model is called.

Every reply is read back from the run's store (the log item each turn names), graded again
by today's graders, and the metrics computed over the regraded trials; cost, tokens and
time to first token come from the recorded model calls. A trial scores 1 when any of its
replies is a correct answer (it stopped there), else 0. ``changed`` counts the trials whose
regraded score differs from the one given while running (a grader changed since).

Groups: each condition × arm over every task, and each condition × arm × task kind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from threadline.cache.pricing import profile
from threadline.eval.multiturn import graders
from threadline.eval.multiturn.grades import RESPONSE_TYPES, Grade
from threadline.eval.multiturn.metrics import (
    Array,
    bootstrap,
    by_turn,
    mean_of,
    share_of,
    summarize,
)
from threadline.eval.multiturn.records import STORE, Run, TrialRecord
from threadline.settings import Durability
from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore

Regraded = tuple[TrialRecord, list[Grade], float, list[dict[str, Any]]]  # grades, cost, calls


def build_report(run: Run, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    store = SQLiteStore(run.path / STORE, durability=Durability.NORMAL)
    try:
        regraded = [_regrade(store, run, trial, progress) for trial in run.trials]
    finally:
        store.close()
    manifest = run.manifest
    settings = manifest["metrics"]
    groups: dict[tuple[str, ...], list[Regraded]] = defaultdict(list)
    for entry in regraded:
        trial = entry[0]
        groups[(trial.condition, trial.arm)].append(entry)
        groups[(trial.condition, trial.arm, trial.task_kind)].append(entry)
    order = {c: i for i, c in enumerate(manifest["conditions"])}
    return {
        "run": manifest["id"], "model": manifest["model"], "simulator": manifest["simulator"],
        "grader_version": graders.GRADER_VERSION, "k": manifest["k"],
        "trials": len(run.trials),
        "changed": sum(1 for t, grades, _, _ in regraded
                       if t.correct != any(g.correct for g in grades)),
        "errors": sum(1 for t in run.trials if t.error),
        "groups": [_group(key, entries, manifest["k"], manifest["seed"], settings)
                   for key, entries in sorted(groups.items(), key=lambda kv: (
                       len(kv[0]), order.get(kv[0][0], 99), kv[0][1:]))],
        "unsupported": manifest.get("unsupported", []),
    }


def _regrade(store: Store, run: Run, trial: TrialRecord,
             progress: Callable[[int], None] | None) -> Regraded:
    task = run.tasks[trial.task_id]
    grades, calls = [], []
    pricing = run.manifest["pricing"]
    bill = profile(pricing["profile"])
    cost = 0.0
    for turn in trial.turns:
        assert trial.conversation_id is not None
        text = store.item(trial.conversation_id, turn.reply_seq).text or ""
        grades.append(graders.grade(task, text))
        call = store.call(turn.call_id)
        usage = call.usage
        cost += bill.bill(usage.prompt_tokens, usage.cached_tokens or 0,
                          pricing["input_price"], model=call.model).cost_usd \
            + (usage.completion_tokens or 0) * pricing["output_price"] / 1e6
        calls.append({"ttft_ms": call.timings.ttft_ms, "prompt": usage.prompt_tokens,
                      "cached": usage.cached_tokens or 0,
                      "completion": usage.completion_tokens or 0})
    if progress is not None:
        progress(1)
    return trial, grades, cost, calls


def _group(key: tuple[str, ...], entries: Sequence[Regraded], k: int, seed: int,
           settings: dict[str, Any]) -> dict[str, Any]:
    name = "/".join(key)
    resamples, confidence = settings["bootstrap"], settings["confidence"]
    opts = {"seed": seed, "resamples": resamples, "confidence": confidence}
    by_task: dict[str, dict[int, float]] = defaultdict(dict)
    for trial, grades, _, _ in entries:
        by_task[trial.task_id][trial.trial] = 1.0 if any(g.correct for g in grades) else 0.0
    complete = {t: s for t, s in by_task.items() if len(s) == k}  # an interrupted run's last
    scores = np.array([[s[i] for i in range(k)] for s in complete.values()],  # task is partial
                      dtype=np.float64).reshape(-1, k)
    ks = sorted({1, k} | ({5} if k >= 5 else set()))
    metrics = {m: e.to_json() for m, e in summarize(
        scores, ks=ks, name=name, **opts).items()} if len(scores) else {}
    first = [next((i for i, g in enumerate(grades, 1) if g.correct), None)
             for _, grades, _, _ in entries]
    most = max((len(grades) for _, grades, _, _ in entries), default=0)
    types = np.array([[sum(g.response_type == kind for g in grades) for kind in RESPONSE_TYPES]
                      for _, grades, _, _ in entries], dtype=np.float64).reshape(-1, 3)
    calls = [c for _, _, _, cs in entries for c in cs]
    ttft = np.array([[c["ttft_ms"]] for c in calls if c["ttft_ms"] is not None],
                    dtype=np.float64).reshape(-1, 1)
    costs = np.array([[cost] for _, _, cost, _ in entries], dtype=np.float64).reshape(-1, 1)
    prompt = sum(c["prompt"] for c in calls)

    def estimate(values: Array, stat: Callable[[Array], Array], label: str) -> Any:
        found = bootstrap(values, stat, name=f"{name}/{label}", **opts)
        return None if found is None else found.to_json()
    return {
        "condition": key[0], "arm": key[1], "kind": key[2] if len(key) > 2 else "all",
        "tasks": len(complete), "trials": len(entries), "metrics": metrics,
        "by_turn": by_turn(first, most, name=name, **opts),
        "response_types": {kind: estimate(types, share_of(i), f"type/{kind}")
                           for i, kind in enumerate(RESPONSE_TYPES)},
        "turns_per_trial": round(sum(len(g) for _, g, _, _ in entries) / max(len(entries), 1),
                                 3),
        "cost_usd_per_trial": estimate(costs, mean_of, "cost"),
        "ttft_ms": estimate(ttft, mean_of, "ttft"),
        "ttft_p50_ms": round(float(np.median(ttft)), 3) if len(ttft) else None,
        "tokens": {"prompt": prompt, "cached": sum(c["cached"] for c in calls),
                   "completion": sum(c["completion"] for c in calls),
                   "reuse_ratio": round(sum(c["cached"] for c in calls) / prompt, 4)
                   if prompt else None},
    }


def tables(report: dict[str, Any]) -> str:
    """The report as plain-text tables."""
    def cell(metric: dict[str, float] | None, digits: int = 3) -> str:
        if not metric:
            return "—"
        return f"{metric['value']:.{digits}f} [{metric['low']:.{digits}f}, " \
               f"{metric['high']:.{digits}f}]"
    lines = [f"run {report['run']}: {report['model']['model']}, simulator "
             f"{report['simulator']['name']}, k={report['k']}, {report['trials']} trials, "
             f"{report['errors']} failed, {report['changed']} changed on re-grading"]
    head = f"{'condition':<9} {'arm':<6} {'kind':<8} {'tasks':>5}  {'P':<22} {'A90':<22} " \
           f"{'U90-10':<22} {'pass^k':<22} {'turns':>5} {'reuse':>6} {'$/trial':>9} " \
           f"{'TTFT ms':>8}"
    lines += ["", head, "-" * len(head)]
    for group in report["groups"]:
        metrics = group["metrics"]
        k = max((int(m.split("^")[1]) for m in metrics if m.startswith("pass^")), default=1)
        cost, ttft = group["cost_usd_per_trial"], group["ttft_ms"]
        reuse = group["tokens"]["reuse_ratio"]
        cost_text = "—" if cost is None else f"{cost['value']:.5f}"
        ttft_text = "—" if ttft is None else f"{ttft['value']:.1f}"
        reuse_text = "—" if reuse is None else f"{reuse:.3f}"
        lines.append(
            f"{group['condition']:<9} {group['arm']:<6} {group['kind']:<8} "
            f"{group['tasks']:>5}  {cell(metrics.get('P')):<22} {cell(metrics.get('A90')):<22}"
            f" {cell(metrics.get('U90-10')):<22} {cell(metrics.get(f'pass^{k}')):<22} "
            f"{group['turns_per_trial']:>5.2f} {reuse_text:>6} {cost_text:>9} {ttft_text:>8}")
    lines += ["", "response types (share of assistant turns):"]
    for group in report["groups"]:
        if group["kind"] == "all":
            shares = ", ".join(f"{kind} {v['value']:.2f}" for kind, v in
                               group["response_types"].items() if v is not None)
            lines.append(f"  {group['condition']}/{group['arm']}: {shares or '—'}")
    if report["unsupported"]:
        lines += ["", "not run (unsupported):"]
        reasons: dict[tuple[str, str], int] = defaultdict(int)
        for unsupported in report["unsupported"]:
            reasons[(unsupported["kind"], unsupported["reason"])] += 1
        lines += [f"  {kind} ({n} tasks): {reason}" for (kind, reason), n in reasons.items()]
    return "\n".join(lines) + "\n"
