"""The inspector's server time: one function per benchmark, each printing ratios measured in
one run.

timeline_first_page: the first page (the newest 20 turns) of a conversation's timeline at
/ui/c/{id}, for a 10,000-turn conversation against a 10-turn one, in one process over one
SQLite file. Each conversation is written straight through ``store.commit`` (as
bench/history_growth.py does: no model), one commit per turn holding the user message, the
reply and its model-call record (usage with cached tokens, timings, a prefix report), so every
turn on the page has a bar, a TTFT and a cost. The page is fetched through the whole app
(the API with the inspector mounted, FastAPI's TestClient, no network) interleaved between
the two conversations; reported: the median of the timed fetches and the first, cold fetch
of each (which also folds the branch's standing constraints and working state, once).
Target: long ÷ short ≤ 2× (medians): the page reads its own turns, not the history.

    .venv/bin/python bench/inspector.py            # full size
    .venv/bin/python bench/inspector.py --quick    # smoke test: 1,000 turns, a few seconds
    .venv/bin/python bench/inspector.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from threadline.cache.prefix import Cause, PrefixReport
from threadline.calls import CallStatus, ModelCall, SentRequest, Timings, Usage
from threadline.engine import Engine
from threadline.items import NewItem, new_id, utc_now
from threadline.models.scripted import ScriptedModel
from threadline.settings import Durability
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite.store import SQLiteStore

TIMELINE_TARGET = 2.0
TURN_TOKENS = 250  # each turn's user message and reply, in tokens


def text_of(prefix: str, n: int, size: int = 500) -> str:
    body = "the quick brown fox jumps over the lazy dog " * (size // 44 + 1)
    return (f"{prefix} {n}: " + body)[:size]


def build(store: SQLiteStore, turns: int) -> str:
    """A conversation of ``turns`` turns, each its messages and one recorded call."""
    cid, head = new_id("c_"), None
    for n in range(1, turns + 1):
        before, prompt = (n - 1) * TURN_TOKENS, n * TURN_TOKENS
        prefix = PrefixReport(None if n == 1 else "previous", prompt * 4, before * 4,
                              before * 4, prompt, before, before, before // 16, prompt // 16,
                              Cause.FIRST_CALL if n == 1 else Cause.APPEND_ONLY, "", None, ())
        call = ModelCall(
            id=new_id("call_"), conversation_id=cid, branch="main", turn=n,
            head_seq=2 * n - 1, reply_seq=None, status=CallStatus.OK, model="scripted",
            # the request's size does not matter to the page, which never reads it
            request=SentRequest(model="scripted", messages=({"role": "user",
                                                              "content": text_of("u", n)},)),
            response={}, usage=Usage(prompt, max(before - 16, 0), 60),
            timings=Timings(ttft_ms=20.0 + n % 7, total_ms=200.0), started_at=utc_now(),
            prefix=prefix.to_json())
        result = store.commit(Commit(
            conversation_id=cid, created_at=utc_now(), expected_head=head,
            create=NewConversation(cid, title=f"{turns} turns") if head is None else None,
            items=[NewItem.user(text_of("user", n)), NewItem.assistant(text_of("reply", n))],
            call=call, call_reply_index=1))
        head = result.items[-1].seq
    return cid


def timeline_first_page(folder: Path, long_turns: int, short_turns: int,
                        rounds: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from threadline.inspector.app import mount
    from threadline.server.app import create_app

    path = folder / "inspector.db"
    store = SQLiteStore(path, durability=Durability.OFF)
    started = time.perf_counter()
    ids = {long_turns: build(store, long_turns), short_turns: build(store, short_turns)}
    built_s = time.perf_counter() - started
    store.close()
    store = SQLiteStore(path)  # reopened: nothing of the build is in its memory
    engine = Engine(store, ScriptedModel())
    app = create_app(engine)
    mount(app, engine)
    client = TestClient(app)

    def fetch(cid: str) -> float:
        start = time.perf_counter()
        page = client.get(f"/ui/c/{cid}", headers={"accept": "text/html"})
        spent = time.perf_counter() - start
        assert page.status_code == 200 and page.text.count('class="turn"') == \
            min(20, long_turns, short_turns if cid == ids[short_turns] else long_turns)
        return spent

    first = {n: fetch(cid) for n, cid in ids.items()}
    timed: dict[int, list[float]] = {n: [] for n in ids}
    for r in range(rounds):
        for n in (list(ids) if r % 2 else list(ids)[::-1]):
            timed[n].append(fetch(ids[n]))
    store.close()
    median = {n: statistics.median(ts) * 1e3 for n, ts in timed.items()}
    ratio = median[long_turns] / median[short_turns]
    return {"benchmark": "timeline_first_page", "turns": [long_turns, short_turns],
            "rounds": rounds, "build_s": round(built_s, 2),
            "median_ms": {str(n): round(v, 3) for n, v in median.items()},
            "first_fetch_ms": {str(n): round(v * 1e3, 3) for n, v in first.items()},
            "ratio_long_vs_short": round(ratio, 3), "target": TIMELINE_TARGET,
            "target_met": ratio <= TIMELINE_TARGET}


BENCHMARKS: dict[str, Callable[[Path, bool], dict[str, Any]]] = {
    "timeline_first_page": lambda folder, quick: timeline_first_page(
        folder, 1_000 if quick else 10_000, 10, 20 if quick else 100),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append",
                        help="run only this benchmark (repeatable)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or list(BENCHMARKS):
            folder = Path(tmp) / name
            folder.mkdir()
            results.append(BENCHMARKS[name](folder, args.quick))
    if args.json:
        print(json.dumps({"benchmark": "inspector", "results": results}))
        return
    for result in results:
        print(f"{result['benchmark']}: " + json.dumps(
            {k: v for k, v in result.items() if k != "benchmark"}))


if __name__ == "__main__":
    main()
