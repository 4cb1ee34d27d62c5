"""Stateless clients: what placing a resent history costs a chat-completions request.

A SQLite store is filled with N conversations (default 10,000) of 20 turns each (40
messages, ~120 bytes each), built through ``store.commit`` at durability ``off``, then
reopened at the default ``full``. ``threadline``'s HTTP app (scripted model) runs under
uvicorn on a loopback port, and an ``httpx`` client alternates two arms turn by turn, each on
its own stored conversation:

  resent   POST /v1/chat/completions with the whole history (system + 40 messages at the
           start, growing by two each turn) and the new message, no conversation id: the
           server finds the conversation by its transcript hashes.
  named    the same turn with ``metadata.conversation_id`` and only the new message.

Reported: median and p90 wall time per request for each arm and their ratio (target:
resent ≤ 1.2 × named), and the median time of placing the history alone
(``interop.resent.place``). The arms alternate so drift on a noisy machine hits both.

    .venv/bin/python bench/stateless.py            # 10,000 conversations, 40 turns per arm
    .venv/bin/python bench/stateless.py --quick    # a few seconds
    .venv/bin/python bench/stateless.py --json
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from threadline.engine import Engine
from threadline.interop.resent import place, resent_from
from threadline.items import ItemKind, NewItem, new_id, utc_now
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.settings import Durability
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite import SQLiteStore

TARGET = 1.2
SYSTEM = "You are a helpful assistant for a bench."


def text_of(who: str, conversation: int, n: int) -> str:
    return f"{who} {n} in conversation {conversation}: " + "lorem ipsum dolor sit amet " * 3


def build(path: Path, conversations: int, turns: int) -> list[str]:
    store = SQLiteStore(path, durability=Durability.OFF)
    ids = []
    started = time.perf_counter()
    for c in range(conversations):
        cid = new_id("c_")
        items = [x for n in range(turns) for x in
                 (NewItem.user(text_of("user", c, n)), NewItem.assistant(text_of("bot", c, n)))]
        store.commit(Commit(conversation_id=cid, created_at=utc_now(), expected_head=None,
                            create=NewConversation(cid, system=SYSTEM), items=items))
        ids.append(cid)
        if (c + 1) % 2_000 == 0:
            print(f"  built {c + 1:,} conversations ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    store.close()
    return ids


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(store: SQLiteStore) -> tuple[str, uvicorn.Server]:
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(Engine(store, ScriptedModel())),
                                           host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return base, server
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError("the server did not start")


def run(conversations: int, turns: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tl-bench-stateless-") as tmp:
        path = Path(tmp) / "threadline.db"
        print(f"building {conversations:,} conversations of {turns} turns...",
              file=sys.stderr, flush=True)
        ids = build(path, conversations, turns)
        store = SQLiteStore(path)
        base, server = serve(store)
        resent_id, named_id = ids[len(ids) // 3], ids[2 * len(ids) // 3]
        messages = [{"role": "system", "content": SYSTEM}] + [
            {"role": "user" if i.kind is ItemKind.USER else "assistant", "content": i.text}
            for i in store.history(resent_id)]
        times: dict[str, list[float]] = {"resent": [], "named": []}
        place_s: list[float] = []
        with httpx.Client(base_url=base, timeout=60) as http:
            for r in range(rounds):
                for arm in (("resent", "named") if r % 2 == 0 else ("named", "resent")):
                    text = f"new message {r} for the {arm} arm"
                    if arm == "resent":
                        body: dict[str, Any] = {"model": "bench", "messages": [
                            *messages, {"role": "user", "content": text}]}
                    else:
                        body = {"model": "bench", "metadata": {"conversation_id": named_id},
                                "messages": [{"role": "user", "content": text}]}
                    start = time.perf_counter()
                    response = http.post("/v1/chat/completions", json=body)
                    times[arm].append(time.perf_counter() - start)
                    response.raise_for_status()
                    got = response.json()
                    if arm == "resent":
                        assert got["threadline"]["conversation_id"] == resent_id, got
                        assert got["threadline"]["history"]["how"] == "continued", got
                        messages += [{"role": "user", "content": text},
                                     {"role": "assistant",
                                      "content": got["choices"][0]["message"]["content"]}]
                        sent = resent_from([(m["role"], m["content"]) for m in messages] +
                                           [("user", "probe")], max_bytes=1 << 20)
                        start = time.perf_counter()
                        place(store, sent)
                        place_s.append(time.perf_counter() - start)
        server.should_exit = True
        store.close()
    out: dict[str, Any] = {"benchmark": "stateless", "conversations": conversations,
                           "turns_per_conversation": turns, "rounds": rounds,
                           "target_ratio": TARGET}
    for arm, values in times.items():
        out[arm] = {"median_ms": statistics.median(values) * 1e3,
                    "p90_ms": statistics.quantiles(values, n=10)[-1] * 1e3}
    out["ratio_median"] = out["resent"]["median_ms"] / out["named"]["median_ms"]
    out["place_median_ms"] = statistics.median(place_s) * 1e3
    out["target_met"] = out["ratio_median"] <= TARGET
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=20, help="turns per stored conversation")
    parser.add_argument("--rounds", type=int, default=40, help="timed turns per arm")
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.conversations, args.rounds = 200, 6
    report = run(args.conversations, args.turns, args.rounds)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"\n/v1/chat/completions at {report['conversations']:,} stored conversations, "
          f"{report['rounds']} turns per arm (scripted model)")
    print(f"{'arm':<8} {'median ms':>10} {'p90 ms':>8}")
    for arm in ("resent", "named"):
        print(f"{arm:<8} {report[arm]['median_ms']:>10.2f} {report[arm]['p90_ms']:>8.2f}")
    verdict = "met" if report["target_met"] else "MISSED"
    print(f"ratio resent/named (median): {report['ratio_median']:.2f} "
          f"(target <= {TARGET}: {verdict}); placing the history alone: "
          f"{report['place_median_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
