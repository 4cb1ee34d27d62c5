"""The deterministic rewriter on real chat: what it changes in ShareGPT's follow-ups.

What is measured
    Every user message of the ShareGPT sample that follows another message, in one half of
    its conversations (``--split``: the dev/test halves the constraint annotations fixed, by
    a hash of the conversation's base id), rewritten by ``rewrite.deterministic.rewrite``
    with the conversation before it (user and assistant turns). There are no reference
    rewrites for chat, so the script counts what a reader can check: how many follow-ups
    the rewriter changes, how many anchors it appends in parentheses (and how many follow-ups
    get more than three), and how many it changes by replacing a word. Most chat follow-ups
    ("continue", "make it shorter", a new request) need nothing put back; a query that gains
    a dozen appended names retrieves what they name instead.

    To compare two versions, run the script from each checkout with ``--dump`` (the
    rewrites), then ``--blind BEFORE AFTER`` writes a sample of the follow-ups whose
    rewrites differ, each pair in a random order, for an annotator who does not know which
    is which (``items.json``), and the key apart (``key.json``); ``--score KEY LABELS``
    tallies the labels (``[{"item", "better": "A"|"B"|"same", "A_bad", "B_bad"}]``).

    PYTHONPATH=src .venv/bin/python bench/rewrite_chat.py --split dev [--json] [--dump F]
    .venv/bin/python bench/rewrite_chat.py --blind before.json after.json --out DIR --n 60
    .venv/bin/python bench/rewrite_chat.py --score DIR/key.json DIR/labels.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from threadline.eval.constraint_corpus import SHAREGPT, split_of
from threadline.rewrite.deterministic import Turn, rewrite

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
_CARRIED = re.compile(r"\(([^()]*)\)\??$")


def follow_ups(data: Path, split: str) -> list[dict[str, Any]]:
    """Each follow-up of the split with its rewrite and latency."""
    out = []
    for line in (data / SHAREGPT).read_text("utf-8").splitlines():
        record = json.loads(line)
        if split_of(SHAREGPT, record["id"].rsplit("_", 1)[0]) != split:
            continue
        history: list[Turn] = []
        for n, turn in enumerate(record["conversations"]):
            text, role = turn.get("value"), turn.get("from")
            if not isinstance(text, str) or role not in ("human", "gpt"):
                continue
            if role == "human" and history:
                started = time.perf_counter()
                rewritten = rewrite(history, text)
                out.append({"id": record["id"], "n": n, "raw": text, "out": rewritten,
                            "ms": (time.perf_counter() - started) * 1000,
                            "previous_user": next((t.text for t in reversed(history)
                                                   if t.role == "user"), ""),
                            "previous_reply": history[-1].text
                            if history[-1].role == "assistant" else ""})
            history.append(Turn("user" if role == "human" else "assistant", text))
    return out


def carried(raw: str, out: str) -> int:
    """Anchors the rewrite appended in parentheses."""
    match = _CARRIED.search(out)
    if match is None or raw.rstrip().endswith(match.group(0)):
        return 0
    return len(match.group(1).split(", "))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    changed = [r for r in rows if r["out"] != r["raw"]]
    counts = [carried(r["raw"], r["out"]) for r in changed]
    replaced = sum(_CARRIED.sub("", r["out"]).rstrip(" ?.!") != r["raw"].rstrip(" ?.!")
                   for r in changed)
    return {"follow_ups": len(rows), "changed": len(changed),
            "changed_share": round(len(changed) / len(rows), 3) if rows else None,
            "carried_anchors": sum(counts), "more_than_3_carried": sum(c > 3 for c in counts),
            "with_a_word_replaced": replaced,
            "latency_p50_ms": round(statistics.median(r["ms"] for r in rows), 3)
            if rows else None}


def blind(before: list[dict[str, Any]], after: list[dict[str, Any]], out: Path, n: int,
          seed: int) -> int:
    pairs = [(b, a) for b, a in zip(before, after, strict=True) if b["out"] != a["out"]]
    rng = random.Random(seed)
    items, key = [], []
    for i, (b, a) in enumerate(rng.sample(pairs, min(n, len(pairs))), 1):
        flip = rng.random() < 0.5
        first, second = (a, b) if flip else (b, a)
        items.append({"item": i, "previous_user_message": b["previous_user"][:700],
                      "previous_reply_start": b["previous_reply"][:700],
                      "follow_up": b["raw"][:600], "A": first["out"][:900],
                      "B": second["out"][:900]})
        key.append({"item": i, "A": "after" if flip else "before"})
    out.mkdir(parents=True, exist_ok=True)
    (out / "items.json").write_text(json.dumps(items, indent=1), "utf-8")
    (out / "key.json").write_text(json.dumps(key), "utf-8")
    print(f"{len(items)} of {len(pairs)} differing follow-ups ({len(before) - len(pairs)} "
          f"the same) written to {out}")
    return 0


def score(key_path: Path, labels_path: Path) -> dict[str, Any]:
    key = {k["item"]: k["A"] for k in json.loads(key_path.read_text("utf-8"))}
    preferred: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    for label in json.loads(labels_path.read_text("utf-8")):
        arms = {"A": key[label["item"]],
                "B": "after" if key[label["item"]] == "before" else "before"}
        preferred[arms.get(label["better"], "same")] += 1
        bad[arms["A"]] += bool(label["A_bad"])
        bad[arms["B"]] += bool(label["B_bad"])
    return {"items": sum(preferred.values()), "preferred": dict(preferred), "bad": dict(bad)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data directory")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--dump", type=Path, help="write every follow-up's rewrite here")
    parser.add_argument("--blind", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--out", type=Path, help="with --blind: the folder to write")
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--seed", type=int, default=20261206)
    parser.add_argument("--score", nargs=2, type=Path, metavar=("KEY", "LABELS"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.score:
        print(json.dumps(score(*args.score)))
        return 0
    if args.blind:
        if args.out is None:
            parser.error("--blind needs --out")
        before, after = (json.loads(p.read_text("utf-8")) for p in args.blind)
        if [(r["id"], r["n"]) for r in before] != [(r["id"], r["n"]) for r in after]:
            parser.error("the two dumps hold different follow-ups: dump the same --split "
                         "of the same data from each version")
        return blind(before, after, args.out, args.n, args.seed)
    if not (args.data / SHAREGPT).is_file():
        parser.error(f"no ShareGPT sample under {args.data} (pass --data)")
    rows = follow_ups(args.data, args.split)
    if args.dump:
        args.dump.write_text(json.dumps(rows), "utf-8")
    found = {"benchmark": "rewrite_chat", "split": args.split, **summary(rows)}
    print(json.dumps(found) if args.json else
          "\n".join(f"{k}: {v}" for k, v in found.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
