"""Telemetry overhead: ``run_turn`` with Prometheus metrics and OpenTelemetry traces on
against off, in one run.

What is measured
    Engines built by ``standard_engine`` over the scripted model, each on its own SQLite file
    in one temporary directory (durability ``normal`` unless told otherwise), one per side:

    off      no telemetry: no metrics hook, no observer, no tracer (the quiet ones).
    control  off again, on a file of its own: its ratio to off is what this machine's noise
             alone makes of the same comparison in the same run (an A/A test), the yardstick
             for the other sides' ratios; no target applies to it.
    metrics  a ``Metrics`` object fed by its turn hook and as the engine's observer, its memory
             figures watched, and exported as a real deployment would be: its registry served
             over HTTP on 127.0.0.1 (prometheus-client's own server, in a thread) and scraped
             every ``--scrape-s`` by a local receiver, another thread fetching and parsing it.
    traces   a ``Tracing`` built from the OTEL_* environment as ``threadline serve`` builds it
             (spans recorded during each turn, described by the tracer's own thread and
             exported over OTLP/HTTP by its relay process), to a local OTLP/HTTP receiver in
             a process of its own, as a collector would be (``python -m
             threadline.tracing.receiver``: an HTTP server on 127.0.0.1 decoding the
             protobuf); content capture off, the default.
    all      both: the metrics side's hook and observer, and the traces side's tracer.

    ``--sides`` picks some of them (off is always there). Each side runs conversations of
    ``--turns`` turns (so the turn index, and the work a turn does, grows the same way on
    every side); each turn is timed with ``perf_counter`` around ``run_turn``. The scraper,
    the tracer's thread, its relay and the receivers run through the whole benchmark, so they
    also take the GIL (or the CPU) while the off side runs: that is the cost a process with
    telemetry on pays on every turn, and each ratio below is charged only with what its side
    adds on top.

How
    After an untimed warm-up conversation per side, each round runs one conversation per side,
    interleaved turn by turn (the side that goes first rotates from turn to turn and round to
    round), so drift on a noisy machine hits every side equally. Reported per side: ms per
    turn (mean and p50), the ratio side ÷ off of the summed turn times (the target's figure),
    and, less moved by a turn the machine descheduled, the median of the per-round ratios, the
    ratio without each side's slowest 5% of turns, and the ratio of the p50s; how many scrapes
    the metrics receiver made and how many spans the trace receiver got (after a final flush:
    every span, or some were dropped); and, apart, the time the metrics hook took per turn,
    the time the tracer took on the turn's own thread (timed in a pass of its own after the
    rounds, so that timing it adds nothing to their ratios), and, per traced turn, the CPU of
    the tracer's own thread and of its relay process (from /proc). Target: ≤ 1.05 for every
    side but control.

    .venv/bin/python bench/telemetry_overhead.py            # full size, every side
    .venv/bin/python bench/telemetry_overhead.py --sides traces   # off against traces only
    .venv/bin/python bench/telemetry_overhead.py --quick    # smoke test, a few seconds
    .venv/bin/python bench/telemetry_overhead.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from threadline.engine import Engine
from threadline.metrics.registry import Metrics
from threadline.models.scripted import ScriptedModel
from threadline.settings import Durability, parse_durability
from threadline.standard import standard_engine
from threadline.stores.sqlite.store import SQLiteStore
from threadline.tracing import from_environment
from threadline.tracing.setup import Tracing
from threadline.turn.hooks import TurnEvent, TurnHook
from threadline.turn.trace import Fact, Span, Step, Tracer

TARGET = 1.05
SIDES = ("off", "control", "metrics", "traces", "all")
CONTROL = "control"  # off again: the noise's yardstick, no target
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


class SpanReceiver:
    """The OTLP/HTTP receiver in a process of its own (``threadline.tracing.receiver``)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "threadline.tracing.receiver"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None
        self.endpoint: str = json.loads(self.process.stdout.readline())["endpoint"]
        self.summary: dict[str, int] = {}

    def stop(self) -> dict[str, int]:
        if not self.summary:
            out, _ = self.process.communicate(timeout=30)  # closes its input: it reports
            self.summary = json.loads(out.strip().splitlines()[-1])
        return self.summary


class TimedTracer:
    """The tracer, with the time its calls take on the turn's thread kept."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer, self.spent = tracer, 0.0
        # called unguarded where the tracer is (turn/trace.py): the guard is the engine's cost
        self.guards_itself = bool(getattr(tracer, "guards_itself", False))

    def span(self, step: Step, name: str = "", *facts: Fact) -> AbstractContextManager[Span]:
        started = time.perf_counter()
        opening = self.tracer.span(step, name, *facts)
        self.spent += time.perf_counter() - started
        return TimedSpan(self, opening)


class TimedSpan:
    def __init__(self, timed: TimedTracer, opening: AbstractContextManager[Span]) -> None:
        self.timed, self.opening = timed, opening
        self.span: Span | None = None

    def __enter__(self) -> TimedSpan:
        started = time.perf_counter()
        self.span = self.opening.__enter__()
        self.timed.spent += time.perf_counter() - started
        return self

    def record(self, *facts: Fact) -> None:
        started = time.perf_counter()
        assert self.span is not None
        self.span.record(*facts)
        self.timed.spent += time.perf_counter() - started

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> Any:
        started = time.perf_counter()
        self.opening.__exit__(kind, error, traceback)
        self.timed.spent += time.perf_counter() - started


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


def traces_to(receiver: SpanReceiver, sample: float = 1.0) -> Tracing:
    """Traces as ``threadline serve`` sets them up from its environment, to ``receiver``;
    ``sample`` below 1: that share of turns, by the SDK's trace-id ratio sampler."""
    os.environ.update(OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
    if sample < 1.0:
        os.environ.update(OTEL_TRACES_SAMPLER="parentbased_traceidratio",
                          OTEL_TRACES_SAMPLER_ARG=str(sample))
    tracing = from_environment()
    assert tracing is not None
    return tracing


def timed_tracer(tracing: Tracing | None, directory: Path, turns: int,
                 conversations_: int = 5) -> tuple[float | None, int]:
    """The tracer's own time on the turn's thread, µs a turn, measured apart from the
    interleaved rounds (so that timing it adds nothing to their ratios): ``conversations_``
    conversations of ``turns`` turns on an engine of their own, the first untimed; and how
    many turns that traced."""
    if tracing is None:
        return None, 0
    timed = TimedTracer(tracing)
    store = SQLiteStore(directory / "timed.db")
    engine = standard_engine(store, ScriptedModel(), tracer=timed)
    for n in range(conversations_):
        if n == 1:
            timed.spent = 0.0
        cid = None
        for k in range(turns):
            cid = engine.run_turn(f"{MESSAGE} ({k})", conversation_id=cid).conversation_id
    store.close()
    return round(1e6 * timed.spent / ((conversations_ - 1) * turns), 2), conversations_ * turns


class Background:
    """What a recording tracer spends off the turn's thread: its own thread describing and
    exporting turns (seconds), and the relay process's CPU (seconds, from /proc)."""

    def __init__(self, thread_s: float, relay_s: float | None) -> None:
        self.thread_s, self.relay_s = thread_s, relay_s

    @classmethod
    def read(cls, tracing: Tracing | None) -> Background | None:
        recorder = getattr(tracing, "recorder", None)
        if tracing is None or recorder is None:
            return None  # live spans: the SDK's batch processor's thread is not measured
        tracing.flush()
        process = getattr(recorder.batches.sink, "process", None)
        relay_s = None
        if process is not None:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            relay_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return cls(recorder.batches.spent_s, relay_s)

    def since(self, before: Background | None, turns: int) -> dict[str, float | None] | None:
        if before is None or not turns:
            return None
        relay = None if self.relay_s is None or before.relay_s is None else round(
            1e6 * (self.relay_s - before.relay_s) / turns, 1)
        return {"recorder_thread_us_per_turn": round(
                    1e6 * (self.thread_s - before.thread_s) / turns, 2),
                "relay_cpu_us_per_turn": relay}


def sdk_floor(directory: Path, n: int = 2000) -> dict[str, float]:
    """What the OpenTelemetry SDK itself costs here, whatever threadline does, in a tight loop
    (its code hot in the CPU's caches, as it is not between the steps of a real turn): as
    many bare spans as one of these turns makes (one, and the rest under it) started and
    ended, µs a turn on the turn's thread; and encoding a span for OTLP (in the batch
    processor's thread), µs a span."""
    from opentelemetry import context, trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    kept = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    store = SQLiteStore(directory / "floor.db")  # one turn, to count its spans
    standard_engine(store, ScriptedModel(), tracer=Tracing(provider)).run_turn(MESSAGE)
    store.close()
    spans_per_turn = len(kept.get_finished_spans())
    kept.clear()
    otel = provider.get_tracer("floor")
    started = time.perf_counter()
    for _ in range(n):
        turn = otel.start_span("turn")
        token = context.attach(trace.set_span_in_context(turn))
        for _ in range(spans_per_turn - 1):
            otel.start_span("step", attributes={"step.n": 1}).end()
        context.detach(token)
        turn.end()
    spans_us = (time.perf_counter() - started) / n * 1e6
    finished = kept.get_finished_spans()[:1000]
    started = time.perf_counter()
    encode_spans(finished).SerializeToString()
    encode_us = (time.perf_counter() - started) / len(finished) * 1e6
    provider.shutdown()
    return {"spans_per_turn": spans_per_turn, "spans_us_per_turn": round(spans_us, 1),
            "encode_us_per_span": round(encode_us, 1)}


def ratios(times: dict[str, list[float]], rounds: dict[str, list[float]]
           ) -> dict[str, dict[str, float]]:
    off = times["off"]
    out = {}
    for side, t in times.items():
        if side == "off":
            continue
        out[side] = {"ratio": round(sum(t) / sum(off), 4),
                     "median_round_ratio": round(statistics.median(rounds[side]), 4),
                     "trimmed_ratio": round(trimmed(t) / trimmed(off), 4),
                     "p50_ratio": round(statistics.median(t) / statistics.median(off), 4)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--turns", type=int, default=25, help="turns per conversation")
    parser.add_argument("--scrape-s", type=float, default=1.0, help="the scraper's interval")
    parser.add_argument("--sides", default=",".join(SIDES),
                        help="which of off, metrics, traces, all (off is always run)")
    parser.add_argument("--trace-sample", type=float, default=1.0,
                        help="share of turns traced (the SDK's trace-id ratio sampler); 1: all")
    parser.add_argument("--durability", type=parse_durability, default=Durability.NORMAL)
    parser.add_argument("--quick", action="store_true", help="smoke test: a few seconds")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.turns, args.scrape_s = 3, 5, 0.1
    sides = ["off", *(s for s in SIDES[1:] if s in args.sides.split(","))]
    unknown = set(args.sides.split(",")) - set(SIDES)
    if unknown:
        parser.error(f"--sides: no side {', '.join(sorted(unknown))}; choose from "
                     f"{', '.join(SIDES)}")

    spans_in = SpanReceiver()
    with tempfile.TemporaryDirectory() as tmp:
        stores = {side: SQLiteStore(Path(tmp) / f"{side}.db", durability=args.durability)
                  for side in sides}
        metrics = Metrics()
        for side in ("metrics", "all"):
            if side in stores:
                metrics.watch_memory(stores[side])
        hook = Timed(metrics.hook)
        tracing = traces_to(spans_in, args.trace_sample) if {"traces", "all"} & set(sides) \
            else None
        engines: dict[str, Engine] = {}
        models = {side: ScriptedModel() for side in sides}
        for side in sides:
            with_metrics = side in ("metrics", "all")
            engines[side] = standard_engine(
                stores[side], models[side], hooks=[hook] if with_metrics else [],
                observer=metrics if with_metrics else None,
                tracer=tracing if side in ("traces", "all") else None)
        server, _ = start_http_server(0, addr="127.0.0.1", registry=metrics.registry)
        scraper = Receiver(f"http://127.0.0.1:{server.server_port}/metrics", args.scrape_s)
        scraper.start()
        try:
            conversations(engines, args.turns, 0)  # warm-up, untimed
            started = Background.read(tracing)
            times: dict[str, list[float]] = {side: [] for side in sides}
            per_round: dict[str, list[float]] = {side: [] for side in sides}
            for r in range(args.rounds):
                took = conversations(engines, args.turns, r)
                for model in models.values():  # kept for tests to read: a real model keeps
                    model.requests.clear()      # nothing, and the collector would walk them
                for side in sides:
                    times[side] += took[side]
                    per_round[side].append(sum(took[side]) / sum(took["off"]))
                print(f"round {r + 1}/{args.rounds}: " + ", ".join(
                    f"{side} ÷ off {per_round[side][-1]:.3f}" for side in sides[1:]),
                    file=sys.stderr)
            tracer_us, timed_turns = timed_tracer(tracing, Path(tmp), args.turns)
            traced_turns = sum(len(times[s]) for s in ("traces", "all") if s in times) + \
                timed_turns
            ended = Background.read(tracing)
            background = None if ended is None else ended.since(started, traced_turns)
        finally:
            scraper.stop()
            server.shutdown()
            if tracing is not None:
                tracing.shutdown()  # flushes what is still queued to the receiver
            received = spans_in.stop()["spans"]
            for store in stores.values():
                store.close()
        floor = sdk_floor(Path(tmp)) if tracing is not None else None
        traced_turns += args.turns * len({"traces", "all"} & set(sides))  # the warm-up

    per_turn = {side: {"turns": len(t), "mean_ms": round(1000 * statistics.fmean(t), 3),
                       "p50_ms": round(1000 * statistics.median(t), 3)}
                for side, t in times.items()}
    compared = ratios(times, per_round)
    report = {"benchmark": "telemetry_overhead", "sides": sides,
              "durability": str(args.durability), "rounds": args.rounds,
              "turns_per_conversation": args.turns, "scrape_s": args.scrape_s,
              "scrapes": scraper.scrapes, "samples_per_scrape": scraper.samples,
              "per_turn": per_turn, "vs_off": compared,
              "trace_sample": args.trace_sample,
              "spans_received": received, "traced_turns": traced_turns,
              "spans_per_traced_turn": round(received / traced_turns, 2)
              if traced_turns else None,
              "hook_us_per_turn": round(1e6 * statistics.fmean(hook.spent), 2)
              if hook.spent else None,
              "tracer_us_per_turn": tracer_us, "background": background,
              "sdk_floor": floor,
              "target": TARGET,
              "target_met": all(c["ratio"] <= TARGET for side, c in compared.items()
                                if side != CONTROL)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for side, figures in per_turn.items():
        print(f"{side:<8} {figures['turns']:>5} turns  {figures['mean_ms']:>8.3f} ms mean  "
              f"{figures['p50_ms']:>8.3f} ms p50")
    for side, c in compared.items():
        verdict = "noise alone, no target" if side == CONTROL else \
            f"target <= {TARGET}: {'met' if c['ratio'] <= TARGET else 'MISSED'}"
        print(f"{side} ÷ off per-turn time: {c['ratio']:.4f} (median round "
              f"{c['median_round_ratio']:.4f}, slowest 5% left out {c['trimmed_ratio']:.4f}, "
              f"p50 {c['p50_ratio']:.4f}; {verdict})")
    print(f"{scraper.scrapes} scrapes of {scraper.samples} samples; "
          f"{received} spans received for {traced_turns} traced turns; "
          + (f"the metrics hook took {report['hook_us_per_turn']:.1f} µs a turn"
             if hook.spent else "no metrics hook ran")
          + (f", the tracer {report['tracer_us_per_turn']:.1f} µs a turn on its thread"
             if report["tracer_us_per_turn"] is not None else ""))
    if background is not None:
        print(f"off the turn's thread: the recorder's thread "
              f"{background['recorder_thread_us_per_turn']:.1f} µs a traced turn, the relay "
              f"process {background['relay_cpu_us_per_turn']} µs of CPU a traced turn")
    if floor is not None:
        print(f"the OpenTelemetry SDK alone, in a tight loop: {floor['spans_us_per_turn']:.1f} "
              f"µs for a turn's {floor['spans_per_turn']} bare spans, and "
              f"{floor['encode_us_per_span']:.1f} µs a span to encode them for OTLP")
    return 0


if __name__ == "__main__":
    sys.exit(main())
