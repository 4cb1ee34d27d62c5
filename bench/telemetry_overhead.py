"""Telemetry overhead: ``run_turn`` with Prometheus metrics on against off, in one run.

What is measured
    Two engines built by ``standard_engine`` over the scripted model, each on its own SQLite
    file in one temporary directory (durability ``normal`` unless told otherwise):

    off  no metrics: no metrics hook, no observer (the engine's quiet one).
    on   a ``Metrics`` object fed by its turn hook and as the engine's observer, its memory
         figures watched, and exported as a real deployment would be: its registry served over
         HTTP on 127.0.0.1 (prometheus-client's own server, in a thread) and scraped every
         ``--scrape-s`` by a local receiver, another thread fetching and parsing the text.

    Each side runs conversations of ``--turns`` turns (so the turn index, and the work a turn
    does, grows the same way on both sides); each turn is timed with ``perf_counter`` around
    ``run_turn``. The scraper runs through the whole benchmark, so its threads also take the
    GIL while the off side runs: that is the cost a process with metrics on pays on every
    turn, and the ratio below is charged only with what the metrics side adds on top.

How
    After an untimed warm-up conversation per side, each round runs one conversation per side,
    the two interleaved turn by turn (the side that goes first alternates from turn to turn
    and round to round), so drift on a noisy machine hits both equally. Reported: ms per turn
    on each side (mean and p50), the ratio on ÷ off of the summed turn times (the target's
    figure), and, less moved by a turn the machine descheduled, the median of the per-round
    ratios, the ratio without each side's slowest 5% of turns, and the ratio of the p50s; how
    many scrapes the receiver made; and, apart, the time the metrics hook itself took per
    turn. Target: ≤ 1.05.

    .venv/bin/python bench/telemetry_overhead.py            # full size
    .venv/bin/python bench/telemetry_overhead.py --quick    # smoke test, a few seconds
    .venv/bin/python bench/telemetry_overhead.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from threadline.engine import Engine
from threadline.metrics.registry import Metrics
from threadline.models.scripted import ScriptedModel
from threadline.settings import Durability, parse_durability
from threadline.standard import standard_engine
from threadline.stores.sqlite.store import SQLiteStore
from threadline.turn.hooks import TurnEvent, TurnHook

TARGET = 1.05
MESSAGE = "Please check the booking for next Tuesday and tell me what it costs. " * 6


class Receiver:
    """A local scraper: fetches ``url`` every ``every_s`` and parses it, until stopped."""

    def __init__(self, url: str, every_s: float) -> None:
        self.url, self.every_s = url, every_s
        self.scrapes, self.samples = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with urllib.request.urlopen(self.url, timeout=5) as response:
                text = response.read().decode("utf-8")
            self.samples = sum(len(f.samples) for f in text_string_to_metric_families(text))
            self.scrapes += 1


class Timed:
    """The metrics hook, with the time it takes kept (the part of the overhead that is not
    noise: what recording a turn costs)."""

    def __init__(self, hook: TurnHook) -> None:
        self.hook, self.name, self.uses_user = hook, hook.name, hook.uses_user
        self.spent: list[float] = []

    def after_turn(self, event: TurnEvent) -> None:
        started = time.perf_counter()
        self.hook.after_turn(event)
        self.spent.append(time.perf_counter() - started)


def conversations(engines: dict[str, Engine], turns: int, first: int) -> dict[str, list[float]]:
    """One conversation of ``turns`` turns per side, turn by turn, the side that goes first
    alternating from ``first``; the time of each turn, in seconds."""
    sides = list(engines)
    times: dict[str, list[float]] = {side: [] for side in sides}
    cids: dict[str, str | None] = dict.fromkeys(sides)
    for n in range(turns):
        for k in range(len(sides)):
            side = sides[(first + n + k) % len(sides)]
            started = time.perf_counter()
            cids[side] = engines[side].run_turn(f"{MESSAGE} ({n})",
                                                conversation_id=cids[side]).conversation_id
            times[side].append(time.perf_counter() - started)
    return times


def trimmed(times: list[float], share: float = 0.05) -> float:
    """The sum without the slowest ``share``: a descheduled turn is the machine's."""
    return sum(sorted(times)[: len(times) - int(len(times) * share)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--turns", type=int, default=25, help="turns per conversation")
    parser.add_argument("--scrape-s", type=float, default=1.0, help="the receiver's interval")
    parser.add_argument("--durability", type=parse_durability, default=Durability.NORMAL)
    parser.add_argument("--quick", action="store_true", help="smoke test: a few seconds")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.turns, args.scrape_s = 3, 5, 0.1

    with tempfile.TemporaryDirectory() as tmp:
        stores = {side: SQLiteStore(Path(tmp) / f"{side}.db", durability=args.durability)
                  for side in ("off", "on")}
        metrics = Metrics()
        metrics.watch_memory(stores["on"])
        hook = Timed(metrics.hook)
        engines = {"off": standard_engine(stores["off"], ScriptedModel()),
                   "on": standard_engine(stores["on"], ScriptedModel(), hooks=[hook],
                                         observer=metrics)}
        server, _ = start_http_server(0, addr="127.0.0.1", registry=metrics.registry)
        receiver = Receiver(f"http://127.0.0.1:{server.server_port}/metrics", args.scrape_s)
        receiver.start()
        try:
            conversations(engines, args.turns, 0)  # warm-up, untimed
            times: dict[str, list[float]] = {"off": [], "on": []}
            ratios = []
            for r in range(args.rounds):
                took = conversations(engines, args.turns, r)
                for side in times:
                    times[side] += took[side]
                ratios.append(sum(took["on"]) / sum(took["off"]))
                print(f"round {r + 1}/{args.rounds}: on ÷ off {ratios[-1]:.3f}",
                      file=sys.stderr)
        finally:
            receiver.stop()
            server.shutdown()
            for store in stores.values():
                store.close()

    ratio = sum(times["on"]) / sum(times["off"])
    per_turn = {side: {"turns": len(t), "mean_ms": round(1000 * statistics.fmean(t), 3),
                       "p50_ms": round(1000 * statistics.median(t), 3)}
                for side, t in times.items()}
    report = {"benchmark": "telemetry_overhead", "telemetry": "metrics",
              "durability": str(args.durability), "rounds": args.rounds,
              "turns_per_conversation": args.turns, "scrape_s": args.scrape_s,
              "scrapes": receiver.scrapes, "samples_per_scrape": receiver.samples,
              "per_turn": per_turn, "ratio_on_vs_off": round(ratio, 4),
              "median_round_ratio": round(statistics.median(ratios), 4),
              "trimmed_ratio": round(trimmed(times["on"]) / trimmed(times["off"]), 4),
              "p50_ratio": round(per_turn["on"]["p50_ms"] / per_turn["off"]["p50_ms"], 4),
              "hook_us_per_turn": round(1e6 * statistics.fmean(hook.spent), 2),
              "target": TARGET,
              "target_met": ratio <= TARGET}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for side, figures in per_turn.items():
        print(f"metrics {side:<3}  {figures['turns']:>5} turns  {figures['mean_ms']:>8.3f} ms "
              f"mean  {figures['p50_ms']:>8.3f} ms p50")
    verdict = "met" if report["target_met"] else "MISSED"
    print(f"on ÷ off per-turn time: {ratio:.4f} (median round {report['median_round_ratio']:.4f}, "
          f"slowest 5% left out {report['trimmed_ratio']:.4f}, p50 {report['p50_ratio']:.4f}; "
          f"target <= {TARGET}: {verdict}); "
          f"{receiver.scrapes} scrapes of {receiver.samples} samples; the hook took "
          f"{report['hook_us_per_turn']:.1f} µs a turn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
