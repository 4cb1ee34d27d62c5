"""The trajectory monitor's cost per turn, against the same turn without it, in one run.

Every script of ``threadline.eval.safety`` (dev and seen, 24 conversations of 4-6 turns)
is played through a standard engine with the scripted model under three arms: no monitor,
the monitor on its rules, and the monitor on rules and embeddings (the dense extra; skipped
without it). The arms alternate for several rounds, each round in a fresh store, with the
load average printed beside it. The monitors remind and restrict as their policy says but
never refuse, so every turn makes its model call in every arm. Reported per arm: the median
and mean time of a turn (``run_turn`` end to end) and its ratio to the arm without the monitor
(target, issue 20: ≤ 1.1x with rules and embeddings), and the monitor's own time per turn
as its decisions record it.

With ``--local`` the turns are answered by the embedded model instead (SmolLM2-135M on the
CPU, replies cut at 48 tokens; 4 scripts, 2 rounds): the same ratio against a real turn.

    .venv/bin/python bench/monitor_cost.py
    .venv/bin/python bench/monitor_cost.py --local
    .venv/bin/python bench/monitor_cost.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from threadline.eval.safety import load_scripts, scripted_model
from threadline.providers.monitor import (
    EmbeddingDetector,
    RiskPolicy,
    RuleDetector,
    TrajectoryMonitor,
    embedding_detector,
)
from threadline.settings import Durability
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.turn import monitoring


def arms(embedder: Any) -> dict[str, TrajectoryMonitor | None]:
    """Fresh monitors: the embedding detector's cache starts empty every round (a text seen
    in an earlier round is not free), over one loaded model."""
    # never refusing: a refused turn skips its model call, and would pass for a cheap one
    policy = RiskPolicy(refuse=None)
    out: dict[str, TrajectoryMonitor | None] = {
        "off": None, "rules": TrajectoryMonitor([RuleDetector()], policy=policy)}
    if embedder is not None:
        out["rules+embeddings"] = TrajectoryMonitor(
            [RuleDetector(), EmbeddingDetector(embedder=lambda: embedder)], policy=policy)
    return out


def run(directory: Path, arm: str, monitor: TrajectoryMonitor | None, scripts: list[Any],
        n: int, model: Any = None) -> tuple[list[float], list[float]]:
    store = SQLiteStore(directory / f"{arm}-{n}.db", durability=Durability.OFF)
    turns, judged = [], []
    try:
        for script in scripts:
            engine = standard_engine(store, model or scripted_model(script),
                                     system=script.system,
                                     recall=False, monitor=monitor or False)
            cid = None
            for turn in script.turns:
                started = time.perf_counter()
                result = engine.run_turn(turn.user, conversation_id=cid)
                turns.append((time.perf_counter() - started) * 1000)
                cid = result.conversation_id
            assert cid is not None
            judged += [float(d["elapsed_ms"]) for i in store.history(cid)
                       if (d := monitoring.decision(i)) is not None]
    finally:
        store.close()
    return turns, judged


def measure(quick: bool, local: bool = False) -> dict[str, Any]:
    scripts = load_scripts("dev") + load_scripts("seen")
    model = None
    if local:  # the same turns answered by the embedded model: what a real turn costs
        from threadline.models.llamacpp import LlamaCppModel, Sampling
        model = LlamaCppModel(threads=1, sampling=Sampling(max_tokens=48))
        scripts = scripts[:1] if quick else scripts[::6]
    if quick:
        scripts = scripts[:2]
    rounds = 1 if quick else 2 if local else 4
    embedder = None
    if embedding_detector() is not None:  # the dense extra is installed
        from threadline.retrieval.dense import Embedder
        embedder = Embedder()
    monitors = arms(embedder)
    times: dict[str, list[float]] = {arm: [] for arm in monitors}
    judged: dict[str, list[float]] = {arm: [] for arm in monitors}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for arm, monitor in monitors.items():  # warm: the embedder loads, caches fill once
            run(Path(tmp), f"warm-{arm}", monitor, scripts[:1], 0, model)
        for n in range(rounds):
            order = list(monitors) if n % 2 == 0 else list(reversed(monitors))
            monitors = arms(embedder)
            for arm in order:
                got, own = run(Path(tmp), arm, monitors[arm], scripts, n + 1, model)
                times[arm] += got
                judged[arm] += own
            loads.append(round(os.getloadavg()[0], 2))
            print(f"round {n + 1}: load {loads[-1]}", file=sys.stderr)
    base = statistics.median(times["off"])
    rows = []
    for arm in monitors:
        median = statistics.median(times[arm])
        rows.append({"arm": arm, "turns": len(times[arm]), "median_ms": round(median, 3),
                     "mean_ms": round(statistics.mean(times[arm]), 3),
                     "ratio_median": round(median / base, 3),
                     "ratio_mean": round(statistics.mean(times[arm])
                                         / statistics.mean(times["off"]), 3),
                     "monitor_ms_median": round(statistics.median(judged[arm]), 3)
                     if judged[arm] else None})
    return {"benchmark": "monitor_cost", "model": "local" if local else "scripted",
            "rounds": rounds, "scripts": len(scripts),
            "load": loads, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two scripts, one round")
    parser.add_argument("--local", action="store_true",
                        help="answer with the embedded model (SmolLM2, 48 tokens a reply) on "
                             "4 scripts, 2 rounds, instead of the scripted model")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.quick, args.local)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['model']} model, {report['scripts']} scripts x {report['rounds']} rounds; "
          f"load {report['load']}")
    print(f"{'arm':<18} {'turns':>6} {'median ms':>10} {'mean ms':>9} {'x median':>9} "
          f"{'x mean':>7} {'monitor ms':>11}")
    for r in report["rows"]:
        print(f"{r['arm']:<18} {r['turns']:>6} {r['median_ms']:>10} {r['mean_ms']:>9} "
              f"{r['ratio_median']:>9} {r['ratio_mean']:>7} {r['monitor_ms_median']!s:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
