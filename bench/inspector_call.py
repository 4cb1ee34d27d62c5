"""The inspector's call page for a 2,000-message request, against serving that request as JSON.

What is measured
    A conversation of ``--messages`` log items (user message + reply pairs of ~500 bytes each,
    written in bulk through ``store.commit`` into a SQLite file), then two turns through the
    engine with the scripted model, so the last call's request has that many messages plus
    the new turn, and a previous call to compare with: the call page shows reuse, the first
    divergence and a diff. Two request shapes, each its own conversation: ``rendered`` (the
    scripted model records its rendered prompt and token ids, as llama.cpp does: the raw
    bytes are the prompt) and ``messages`` (the provider-shaped messages only, as an HTTP
    backend records them: the raw bytes are the canonical JSON payload).

    Timed with ``perf_counter``, through the same in-process ASGI client (FastAPI's
    TestClient), each request reading the call from the store as a server would:

      page   GET /ui/calls/ID                  the call page: its history paginated (the
                                               page shown: the last 100 messages), the raw
                                               bytes whole, each message's reuse; the diff
                                               inline when the previous request is under
                                               256 KiB, else linked (so at 2,000 messages)
      diff   GET /ui/calls/ID/diff             that diff on its own page (reads both
                                               requests; reported, not part of the target)
      json   GET /v1/calls/ID?request=true     the API's record of the same call: the bare
                                               request JSON
      dumps  store.call(ID) + json.dumps(...)  the same JSON without HTTP, in-process

    Interleaved round by round (the order rotates), after a warm-up of each; reported: the
    median ms of each, the page's bytes, and the ratios page ÷ json (the target's figure)
    and page ÷ dumps. Target: page ÷ json ≤ 3.

    .venv/bin/python bench/inspector_call.py            # full size: 2,000 messages
    .venv/bin/python bench/inspector_call.py --quick    # smoke test, a few seconds
    .venv/bin/python bench/inspector_call.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from threadline.engine import Engine
from threadline.inspector.app import mount
from threadline.items import NewItem, new_id, utc_now
from threadline.models.base import Completion
from threadline.models.scripted import ScriptedModel
from threadline.request import Request
from threadline.server.app import create_app
from threadline.settings import Durability
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite.store import SQLiteStore

TARGET = 3.0


def text_of(prefix: str, n: int, size: int = 500) -> str:
    body = "the quick brown fox jumps over the lazy dog " * (size // 44 + 1)
    return (f"{prefix} {n}: " + body)[:size]


class MessagesOnly(ScriptedModel):
    """The scripted model, recording its requests as an HTTP backend does: messages only."""

    def complete(self, request: Request, **kwargs: Any) -> Completion:
        done = super().complete(request, **kwargs)
        return replace(done, sent=replace(done.sent, rendering=None))


def build(store: SQLiteStore, messages: int, model: ScriptedModel) -> str:
    """A conversation of ``messages`` items in bulk, then two turns: the last call's id."""
    cid, head = new_id("c_"), None
    pairs = messages // 2
    for start in range(0, pairs, 500):
        items = [x for i in range(start, min(start + 500, pairs)) for x in
                 (NewItem.user(text_of("user", i)), NewItem.assistant(text_of("reply", i)))]
        result = store.commit(Commit(conversation_id=cid, created_at=utc_now(),
                                     expected_head=head, items=items,
                                     create=NewConversation(cid) if head is None else None))
        head = result.items[-1].seq
    engine = Engine(store, model)
    for n in range(2):
        engine.run_turn(text_of("user", pairs + n), conversation_id=cid)
    last = store.last_call(cid)
    assert last is not None
    return last.id


def app_for(engine: Engine) -> FastAPI:
    """The service with the inspector mounted, as ``threadline serve`` serves it."""
    app = create_app(engine)
    mount(app, engine)
    return app


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def measure(path: Path, messages: int, shape: str, rounds: int) -> dict[str, Any]:
    store = SQLiteStore(path, durability=Durability.OFF)
    try:
        model = MessagesOnly() if shape == "messages" else ScriptedModel()
        call_id = build(store, messages, model)
        call = store.call(call_id)
        assert call.request is not None and call.prefix is not None
        client = TestClient(app_for(Engine(store, ScriptedModel())))
        sizes: dict[str, int] = {}

        def page() -> None:
            got = client.get(f"/ui/calls/{call_id}")
            assert got.status_code == 200, got.text[:500]
            sizes["page"] = len(got.content)

        def diff() -> None:
            got = client.get(f"/ui/calls/{call_id}/diff")
            assert got.status_code == 200
            sizes["diff"] = len(got.content)

        def api_json() -> None:
            got = client.get(f"/v1/calls/{call_id}", params={"request": "true"})
            assert got.status_code == 200
            sizes["json"] = len(got.content)

        def dumps() -> None:
            sizes["dumps"] = len(json.dumps(store.call(call_id).to_json(with_request=True)))

        sides = {"page": page, "json": api_json, "dumps": dumps, "diff": diff}
        for fn in sides.values():  # warm-up: imports, template compilation, page cache
            fn()
        times: dict[str, list[float]] = {name: [] for name in sides}
        names = list(sides)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(timed(sides[name]))
        median = {name: statistics.median(values) for name, values in times.items()}
        return {"shape": shape, "request_messages": len(call.request.messages),
                "request_bytes": len(call.request.exact_bytes()),
                "cause": call.prefix["cause"], "rounds": rounds,
                "page_ms": round(median["page"], 2), "json_ms": round(median["json"], 2),
                "dumps_ms": round(median["dumps"], 2), "diff_ms": round(median["diff"], 2),
                "diff_inline": "diff-link" not in client.get(f"/ui/calls/{call_id}").text,
                "bytes": sizes,
                "page_vs_json": round(median["page"] / median["json"], 3),
                "page_vs_dumps": round(median["page"] / median["dumps"], 3)}
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--shapes", default="rendered,messages")
    parser.add_argument("--quick", action="store_true", help="200 messages, 5 rounds")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    messages, rounds = (200, 5) if args.quick else (args.messages, args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        runs = [measure(Path(tmp) / f"{shape}.db", messages, shape, rounds)
                for shape in args.shapes.split(",")]
    worst = max(run["page_vs_json"] for run in runs)
    report = {"benchmark": "inspector_call", "messages": messages, "target": TARGET,
              "runs": runs, "worst_page_vs_json": worst, "meets_target": worst <= TARGET}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"call page of a {messages:,}-message conversation's last call, {rounds} rounds")
    for run in runs:
        print(f"  {run['shape']:<9} {run['request_messages']:,} messages, "
              f"{run['request_bytes']:,} bytes ({run['cause']}): page {run['page_ms']} ms "
              f"({run['bytes']['page']:,} B) · json {run['json_ms']} ms "
              f"({run['bytes']['json']:,} B) · dumps {run['dumps_ms']} ms · diff page "
              f"{run['diff_ms']} ms ({'inline too' if run['diff_inline'] else 'linked'})")
        print(f"            page ÷ json {run['page_vs_json']}  page ÷ dumps "
              f"{run['page_vs_dumps']}")
    print(f"worst page ÷ json: {worst} (target ≤ {TARGET}): "
          f"{'met' if worst <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
