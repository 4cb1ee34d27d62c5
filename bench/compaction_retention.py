"""Constraint retention and shard-fact recall through repeated compaction, in one run.

What is measured
    Conversations are replayed turn by turn and compacted to a small token budget k = 1, 2
    and 3 times (evenly spaced, the last after the final turn); then the context the next
    request would carry is checked:

    constraint retention  the fraction of standing constraints still present verbatim;
    shard-fact recall     the fraction of the numbers and identifiers the user revealed
                          (every user message after the first) still present.

    Sources: ``constraint_fixtures.py`` (conversations written for this benchmark, each rule
    listed verbatim) and the sharded conversations of ``../shared/data/lost-in-conversation``
    (real simulated users revealing a task's requirements one per turn, with real assistant
    replies; each revealed requirement counts as a constraint to retain).

    Three compactors, same turns, same budget, same compaction points:

    threadline      constraints detected and recorded before each compaction and pinned by
                    it (the rules with the embedding classifier when the dense extra is
                    installed, as THREADLINE_CONSTRAINT_CLASSIFIER's default; ``--rules``:
                    the rules alone); the dropped turns leave a recall-first summary
    summary-only    the same summary, no constraint extraction or pinning
    recency         drop the oldest turns, keep the last ones ("keep the last N turns")

    Token counts use a word tokenizer (the figures are ratios of presence, not of tokens).

    .venv/bin/python bench/compaction_retention.py
    .venv/bin/python bench/compaction_retention.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from constraint_fixtures import FIXTURES  # noqa: E402

from threadline.compaction.compact import plan  # noqa: E402
from threadline.compaction.constraints import Detector, detect, undetected  # noqa: E402
from threadline.compaction.plan import Policy, word_count  # noqa: E402
from threadline.items import Item, NewItem, next_item  # noqa: E402
from threadline.request import Request  # noqa: E402
from threadline.standard import constraint_detector  # noqa: E402
from threadline.turn.assemble import MessageMemo, assemble  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "lost-in-conversation"
TARGET_RETENTION, TARGET_RECALL = 0.95, 1.0
COMPACTORS = ("threadline", "summary-only", "recency")
_T = datetime(2026, 5, 3, tzinfo=UTC)
_FACT = re.compile(r"\d+(?:[.,:/]\d+)*%?|\b[A-Za-z]*\d[\w-]*|\b[A-Z][A-Za-z]*[A-Z][\w-]*\b|"
                   r"\b\w+_\w+\b")
_REPLY = ("Understood. Here is a careful answer that works through the request step by step, "
          "restating the details that matter and explaining the reasoning in full, so that the "
          "next steps are clear. ") * 3


@dataclass(frozen=True)
class Case:
    source: str
    name: str
    turns: tuple[tuple[str, str], ...]  # (user, assistant)
    constraints: tuple[str, ...]


def fixture_cases() -> list[Case]:
    return [Case("fixtures", f.name, tuple((t, _REPLY) for t in f.turns), f.constraints)
            for f in FIXTURES]


def lic_cases(limit: int | None) -> list[Case]:
    cases = []
    for name in ("sim_logs_math.jsonl", "sim_logs_actions.jsonl"):
        path = DATA / name
        if not path.exists():
            continue
        for line in path.read_text("utf-8").splitlines():
            record = json.loads(line)
            if record["conv_type"] != "sharded":
                continue
            turns, user = [], None
            for entry in record["trace"]:
                if entry["role"] == "user":
                    user = entry["content"]
                elif entry["role"] == "assistant" and user is not None:
                    turns.append((user, entry["content"] or ""))
                    user = None
            if len(turns) >= 3:
                cases.append(Case("lost-in-conversation", record["conv_id"], tuple(turns),
                                  tuple(u.strip() for u, _ in turns[1:])))
    return cases[:limit]


def facts(case: Case) -> set[str]:
    return {m.group() for user, _ in case.turns[1:] for m in _FACT.finditer(user)}


def _append(history: list[Item], new: NewItem) -> None:
    history.append(next_item(history, new, conversation_id="c_bench", created_at=_T))


def replay(case: Case, compactor: str, k: int, budget: int,
           detector: Detector = detect) -> tuple[float, float, int]:
    memo = MessageMemo()

    def assemble_for(history: Sequence[Item]) -> Request:
        return assemble(history, system="You are a helpful assistant.", memo=memo)

    policy = Policy(high_water=budget * 2, low_water=budget, keep_turns=1,
                    summarize=compactor != "recency")
    n = len(case.turns)
    points = {max(1, round(n * (i + 1) / k)) for i in range(k)}
    history: list[Item] = []
    applied = 0
    for index, (user, reply) in enumerate(case.turns, start=1):
        _append(history, NewItem.user(user))
        _append(history, NewItem.assistant(reply))
        if index not in points:
            continue
        if compactor == "threadline":
            for new in undetected(history, detector):
                _append(history, new)
        strategy = {"threadline": None, "summary-only": "summary", "recency": "window"}[compactor]
        chosen = plan(history, assemble_for, word_count, policy, reason="manual",
                      budget=budget, strategy=strategy)
        if chosen is None:
            continue
        if compactor != "threadline":
            chosen = replace(chosen, pinned=())
        _append(history, chosen.to_item())
        applied += 1
    context = "\n".join(m.content for m in assemble_for(history).messages)
    kept = sum(1 for c in case.constraints if c in context) / len(case.constraints) \
        if case.constraints else 1.0
    wanted = facts(case)
    recalled = sum(1 for f in wanted if f in context) / len(wanted) if wanted else 1.0
    return kept, recalled, applied


def run(cases: list[Case], budget: int, detector: Detector = detect) -> dict:
    out: dict = {}
    for source in sorted({c.source for c in cases}):
        subset = [c for c in cases if c.source == source]
        out[source] = {"conversations": len(subset),
                       "constraints": sum(len(c.constraints) for c in subset),
                       "facts": sum(len(facts(c)) for c in subset), "by_compactions": {}}
        for k in (1, 2, 3):
            row = {}
            for compactor in COMPACTORS:
                results = [replay(c, compactor, k, budget, detector) for c in subset]
                row[compactor] = {
                    "constraint_retention": _pooled(subset, results, 0),
                    "fact_recall": _pooled(subset, results, 1),
                    "conversations_fully_retained": sum(1 for r in results if r[0] == 1.0),
                    # a compactor that finds nothing worth doing keeps everything by default
                    "compactions_applied": sum(r[2] for r in results)}
            out[source]["by_compactions"][str(k)] = row
    return out


def _pooled(cases: list[Case], results: list[tuple[float, float, int]], which: int) -> float:
    """Retained ÷ total over all conversations (each weighted by its constraint or fact
    count), so long conversations count for what they carry."""
    weights = [len(c.constraints) if which == 0 else len(facts(c)) for c in cases]
    total = sum(weights)
    return sum(w * r[which] for w, r in zip(weights, results, strict=True)) / total \
        if total else 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=300, help="tokens after a compaction")
    parser.add_argument("--limit", type=int, help="at most this many LiC conversations")
    parser.add_argument("--quick", action="store_true", help="fixtures only, no shared data")
    parser.add_argument("--rules", action="store_true",
                        help="detect constraints with the rules alone (no classifier)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cases = fixture_cases() + ([] if args.quick else lic_cases(args.limit))
    detector = constraint_detector(False if args.rules else None)
    started = time.perf_counter()
    results = run(cases, args.budget, detector)
    ours = [row["threadline"] for r in results.values() for row in r["by_compactions"].values()]
    report = {"benchmark": "compaction_retention", "budget_tokens": args.budget,
              "detector": "rules" if detector is detect else "rules + classifier",
              "seconds": round(time.perf_counter() - started, 1), "sources": results,
              "targets": {"constraint_retention": TARGET_RETENTION, "fact_recall": TARGET_RECALL},
              "target_met": {
                  "constraint_retention": min(r["constraint_retention"] for r in ours)
                  >= TARGET_RETENTION,
                  "fact_recall": min(r["fact_recall"] for r in ours) >= TARGET_RECALL}}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"budget {args.budget} tokens per compaction; detector: {report['detector']}; "
          f"{report['seconds']} s")
    for source, r in results.items():
        print(f"\n{source}: {r['conversations']} conversations, {r['constraints']} constraints, "
              f"{r['facts']} facts")
        print(f"  {'compactions':<12}{'compactor':<14}{'retention':>10}{'fact recall':>13}"
              f"{'all kept':>10}{'applied':>9}")
        for k, row in r["by_compactions"].items():
            for compactor, m in row.items():
                print(f"  {k:<12}{compactor:<14}{m['constraint_retention']:>10.3f}"
                      f"{m['fact_recall']:>13.3f}{m['conversations_fully_retained']:>10}"
                      f"{m['compactions_applied']:>9}")
    print(f"\ntargets met: {report['target_met']}")
    print(f"median fact recall (threadline): "
          f"{statistics.median(r['fact_recall'] for r in ours):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
