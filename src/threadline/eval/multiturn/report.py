"""A run's report, recomputed from what the run recorded: no model is called.

Every reply is read back from the run's store (the log item each turn names), graded again
by today's graders, and the metrics computed over the regraded trials; cost, tokens and
time to first token come from the recorded model calls. A trial scores 1 when any of its
replies is a correct answer (it stopped there), else 0. ``changed`` counts the trials whose
regraded score differs from the one given while running (a grader changed since).

Groups: each condition × arm over every task, and each condition × arm × task kind. Each
group says how much of its prompt tokens the backend found cached (the reuse ratio) and how
many of its calls' prefix reports name a cause threadline does not expect (a prefix broken
by something other than a first call, a compaction or the previous turn's tail).

Paired: each arm against the run's plain arm under the same condition (and kind), over the
tasks both completed, trial *i* against trial *i* (the same seed): the difference of every
metric, with a paired bootstrap interval.
"""

from __future__ import annotations

from collections import Counter, defaultdict
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
    paired,
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
    arms = {a["name"]: i for i, a in enumerate(manifest.get("arms", []))}  # as configured
    keys = sorted(groups, key=lambda key: (len(key), order.get(key[0], 99),
                                           arms.get(key[1], 99), key[1:]))
    base = baseline(manifest)
    opts = {"k": manifest["k"], "seed": manifest["seed"], "settings": settings}
    return {
        "run": manifest["id"], "model": manifest["model"], "simulator": manifest["simulator"],
        "grader_version": graders.GRADER_VERSION, "k": manifest["k"],
        "trials": len(run.trials),
        "changed": sum(1 for t, grades, _, _ in regraded
                       if t.correct != any(g.correct for g in grades)),
        "errors": sum(1 for t in run.trials if t.error),
        "groups": [_group(key, groups[key], **opts) for key in keys],
        "baseline": base,
        "paired": [_paired(key, groups[key], groups[(key[0], base, *key[2:])], **opts)
                   for key in keys if base is not None and key[1] != base
                   and (key[0], base, *key[2:]) in groups],
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
        prefix = call.prefix or {}
        calls.append({"ttft_ms": call.timings.ttft_ms, "prompt": usage.prompt_tokens,
                      "cached": usage.cached_tokens or 0,
                      "completion": usage.completion_tokens or 0,
                      "cause": prefix.get("cause"), "expected": prefix.get("expected", True)})
    if progress is not None:
        progress(1)
    return trial, grades, cost, calls


def baseline(manifest: dict[str, Any]) -> str | None:
    """The name of the run's plain arm, the one every other arm is paired against."""
    return next((a["name"] for a in manifest.get("arms", [])
                 if a.get("kind", a.get("name")) == "plain"), None)


def _scores(entries: Sequence[Regraded], k: int) -> dict[str, list[float]]:
    """Each task's k trial scores, for the tasks with all k (an interrupted run's last task
    is partial)."""
    by_task: dict[str, dict[int, float]] = defaultdict(dict)
    for trial, grades, _, _ in entries:
        by_task[trial.task_id][trial.trial] = 1.0 if any(g.correct for g in grades) else 0.0
    return {task: [scores[i] for i in range(k)] for task, scores in by_task.items()
            if len(scores) == k}


def _ks(k: int) -> list[int]:
    return sorted({1, k} | ({5} if k >= 5 else set()))


def _reuse(entries: Sequence[Regraded]) -> float | None:
    calls = [c for _, _, _, cs in entries for c in cs]
    prompt = sum(c["prompt"] for c in calls)
    return round(sum(c["cached"] for c in calls) / prompt, 4) if prompt else None


def _group(key: tuple[str, ...], entries: Sequence[Regraded], k: int, seed: int,
           settings: dict[str, Any]) -> dict[str, Any]:
    name = "/".join(key)
    resamples, confidence = settings["bootstrap"], settings["confidence"]
    opts = {"seed": seed, "resamples": resamples, "confidence": confidence}
    complete = _scores(entries, k)
    scores = np.array(list(complete.values()), dtype=np.float64).reshape(-1, k)
    ks = _ks(k)
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
                   "reuse_ratio": _reuse(entries)},
        "prefix": {"calls": len(calls), "unexpected": sum(not c["expected"] for c in calls),
                   "causes": dict(sorted(Counter(str(c["cause"]) for c in calls).items()))},
    }


def _paired(key: tuple[str, ...], entries: Sequence[Regraded], base: Sequence[Regraded],
            k: int, seed: int, settings: dict[str, Any]) -> dict[str, Any]:
    ours, theirs = _scores(entries, k), _scores(base, k)
    tasks = [task for task in ours if task in theirs]
    shaped = [np.array([s[t] for t in tasks], dtype=np.float64).reshape(-1, k)
              for s in (ours, theirs)]
    delta = {m: e.to_json() for m, e in paired(
        *shaped, ks=_ks(k), seed=seed, resamples=settings["bootstrap"],
        confidence=settings["confidence"], name="paired/" + "/".join(key)).items()} \
        if tasks else {}
    return {"condition": key[0], "arm": key[1], "baseline": base[0][0].arm,
            "kind": key[2] if len(key) > 2 else "all", "tasks": len(tasks), "delta": delta,
            "reuse_ratio": _reuse(entries), "baseline_reuse_ratio": _reuse(base)}


def tables(report: dict[str, Any]) -> str:
    """The report as plain-text tables."""
    def cell(metric: dict[str, float] | None, digits: int = 3, sign: str = "") -> str:
        if not metric:
            return "—"
        return f"{metric['value']:{sign}.{digits}f} [{metric['low']:{sign}.{digits}f}, " \
               f"{metric['high']:{sign}.{digits}f}]"

    def ratio(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"
    lines = [f"run {report['run']}: {report['model']['model']}, simulator "
             f"{report['simulator']['name']}, k={report['k']}, {report['trials']} trials, "
             f"{report['errors']} failed, {report['changed']} changed on re-grading"]
    arm = max([6, *(len(g["arm"]) for g in report["groups"])])
    head = f"{'condition':<9} {'arm':<{arm}} {'kind':<8} {'tasks':>5}  {'P':<22} " \
           f"{'A90':<22} {'U90-10':<22} {'pass^k':<22} {'turns':>5} {'reuse':>6} " \
           f"{'breaks':>6} {'$/trial':>9} {'TTFT ms':>8}"
    lines += ["", head, "-" * len(head)]
    for group in report["groups"]:
        metrics = group["metrics"]
        k = max((int(m.split("^")[1]) for m in metrics if m.startswith("pass^")), default=1)
        cost, ttft = group["cost_usd_per_trial"], group["ttft_ms"]
        cost_text = "—" if cost is None else f"{cost['value']:.5f}"
        ttft_text = "—" if ttft is None else f"{ttft['value']:.1f}"
        breaks = group.get("prefix", {}).get("unexpected")
        lines.append(
            f"{group['condition']:<9} {group['arm']:<{arm}} {group['kind']:<8} "
            f"{group['tasks']:>5}  {cell(metrics.get('P')):<22} {cell(metrics.get('A90')):<22}"
            f" {cell(metrics.get('U90-10')):<22} {cell(metrics.get(f'pass^{k}')):<22} "
            f"{group['turns_per_trial']:>5.2f} {ratio(group['tokens']['reuse_ratio']):>6} "
            f"{'—' if breaks is None else breaks:>6} {cost_text:>9} {ttft_text:>8}")
    if report.get("paired"):
        lines += ["", f"each arm against {report['baseline']} (paired: the same tasks, trials "
                  "and seeds; the difference, arm minus baseline):", ""]
        head = f"{'condition':<9} {'arm':<{arm}} {'kind':<8} {'tasks':>5}  {'ΔP':<25} " \
               f"{'ΔA90':<25} {'ΔU90-10':<25} {'Δpass^k':<25} {'reuse':>6} {'base':>6}"
        lines += [head, "-" * len(head)]
        for pair in report["paired"]:
            delta = pair["delta"]
            k = max((int(m.split("^")[1]) for m in delta if m.startswith("pass^")), default=1)
            lines.append(
                f"{pair['condition']:<9} {pair['arm']:<{arm}} {pair['kind']:<8} "
                f"{pair['tasks']:>5}  " + " ".join(
                    f"{cell(delta.get(m), sign='+'):<25}" for m in ("P", "A90", "U90-10",
                                                                     f"pass^{k}"))
                + f" {ratio(pair['reuse_ratio']):>6} {ratio(pair['baseline_reuse_ratio']):>6}")
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
