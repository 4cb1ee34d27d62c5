"""What keeping each message as a ``turn`` entry costs the memory writer, per message, against
the writer without it (the path before), on a LoCoMo conversation: both sides ingest the same
sessions into a scratch store and learn after each, rotating which goes first.

    .venv/bin/python bench/memory_turns.py [--rounds 3] [--sample 0] [--quick] [--json]

Needs ../shared/data/locomo (CC BY-NC: read in place for evaluation only). The writer runs off
the request path; recall's own cost per turn is reported by ``threadline eval locomo``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from threadline.eval.locomo import Sample, _say, load_locomo
from threadline.items import new_id
from threadline.memory.store import MemoryStore
from threadline.memory.writer import MemoryWriter, enqueue
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite import SQLiteStore

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / \
    "locomo_first5.json"


def writer_ms_per_message(sample: Sample, *, keep_turns: bool, sessions: int) -> float:
    with tempfile.TemporaryDirectory(prefix="threadline-bench-") as scratch:
        store = SQLiteStore(Path(scratch) / "w.db")
        clock = [sample.sessions[0].when]
        memory = MemoryStore(store, clock=lambda: clock[0])
        writer = MemoryWriter(store, memory)
        if not keep_turns:  # the writer before turns were kept
            writer._keep_turn = lambda *args: None  # type: ignore[method-assign]
        conversation = new_id("c_")
        store.commit(Commit(conversation_id=conversation, created_at=clock[0],
                            expected_head=None, create=NewConversation(conversation)))
        spent, messages = 0.0, 0
        for session in sample.sessions[:sessions]:
            clock[0] = session.when
            for offset, turn in enumerate(session.turns):
                item = _say(store, conversation, turn, session.when + timedelta(seconds=offset))
                enqueue(store, item, turn.speaker)
                messages += 1
            started = time.perf_counter()
            while writer.run(limit=500):
                pass
            spent += time.perf_counter() - started
        store.close()
    return spent * 1000 / messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="one round, four sessions")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sample = load_locomo(DATA)[args.sample]
    rounds, sessions = (1, 4) if args.quick else (args.rounds, len(sample.sessions))
    sides: dict[bool, list[float]] = {True: [], False: []}
    for n in range(rounds):
        for keep in (True, False) if n % 2 == 0 else (False, True):
            sides[keep].append(writer_ms_per_message(sample, keep_turns=keep,
                                                     sessions=sessions))
    with_turns, without = statistics.median(sides[True]), statistics.median(sides[False])
    report = {"sample": sample.id, "sessions": sessions, "rounds": rounds,
              "writer_ms_per_message": {"with_turns": round(with_turns, 3),
                                        "without_turns": round(without, 3)},
              "ratio": round(with_turns / without, 2)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{sample.id}, {sessions} sessions, {rounds} rounds: writer "
              f"{with_turns:.2f} ms/message keeping turns, {without:.2f} without "
              f"({report['ratio']}x)")


if __name__ == "__main__":
    main()
