"""Chaos: replicas on one PostgreSQL database, concurrent clients, retries, and a SIGKILL.

What runs
    ``--replicas`` threadline HTTP servers (separate processes: the real service, with the
    scripted model streaming a short reply) share one fresh schema of one PostgreSQL database.
    ``--clients`` client threads each send ``--messages`` messages, every one with its own
    client message id, to a random one of ``--conversations`` shared conversations through a
    random replica. A client retries the same message (same id) through a random replica on a
    dropped connection, a 5xx or a 409; ``--impatience`` of first attempts give up after a few
    milliseconds, as a flaky phone would, and retry while the first request still runs; and
    ``--retry-rate`` of acknowledged messages are sent once more afterwards, as a client that
    missed the answer would. Once ``--kill-at`` of the messages are acknowledged, one replica
    gets ``SIGKILL`` mid-run; its clients' retries land on the others, and a conversation
    whose lease it held waits out the lease's expiry.

What is checked, from the database afterwards
    acknowledged            messages a client got a 200 for
    lost                    acknowledged messages, or the replies they were acknowledged with,
                            missing from the log
    forked                  conversations with more than one branch, or whose hash chain or
                            parent links do not verify
    duplicates              user messages stored more than once (by client message id), plus
                            acknowledgements of one message with two different replies
    duplicated_answers      messages answered by more than one successful model call
    duplicated_side_effects messages whose side effect took effect more than once. Each turn
                            first calls a side-effecting ``ledger`` tool with the message, whose
                            backing table applies an idempotency key once and logs every
                            attempt: attempts above the applied count are replays that the key
                            absorbed (at-least-once execution after a crash)
    readable                every conversation reads back whole
    answered_with_the_next  messages whose own turn died with the killed replica and that the
                            next turn answered with them in view (a retry returns that reply)

    .venv/bin/python bench/chaos.py --replicas 2 --clients 50 --conversations 10
    .venv/bin/python bench/chaos.py --quick --json

``--database-url`` (default ``$THREADLINE_TEST_DATABASE_URL``, else the local test server)
names the database; the run creates a schema of its own there and drops it at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from threadline.calls import CallStatus
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel, ToolCalls, echo_reply
from threadline.request import Request
from threadline.stores.postgres import PostgresStore, migrate
from threadline.stores.verify import verify_conversation
from threadline.turn.tools import Tool, ToolContext

DEFAULT_URL = os.environ.get("THREADLINE_TEST_DATABASE_URL",
                             "postgresql://postgres@127.0.0.1:5432/test")


LEDGER = """
CREATE TABLE chaos_ledger (key text PRIMARY KEY, entry text NOT NULL);
CREATE TABLE chaos_attempts (key text NOT NULL, entry text NOT NULL);
"""


def ledger(url: str) -> Tool:
    """A side-effecting tool: the system behind it applies each idempotency key once (a
    unique key) and logs every attempt, so replays show up without taking effect twice."""
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, min_size=1, max_size=4, open=True)

    def record(arguments: Mapping[str, Any], context: ToolContext) -> str:
        with pool.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO chaos_attempts (key, entry) VALUES (%s, %s)",
                         (context.idempotency_key, arguments["entry"]))
            conn.execute("INSERT INTO chaos_ledger (key, entry) VALUES (%s, %s) "
                         "ON CONFLICT (key) DO NOTHING", (context.idempotency_key,
                                                          arguments["entry"]))
        return "recorded"

    return Tool("ledger", "Record the user's message in the ledger.",
                {"type": "object", "required": ["entry"],
                 "properties": {"entry": {"type": "string"}}}, record, side_effect=True)


def record_then_reply(request: Request) -> str | ToolCalls:
    """The replicas' model: a new user message goes to the ledger first, then gets a reply."""
    last = request.messages[-1]
    if last.role == "user":
        return ToolCalls.of(("ledger", {"entry": last.content}))
    return echo_reply(request)


def serve_replica(url: str, port: int, token_delay_s: float) -> None:
    """One replica: the threadline service over the shared database."""
    import uvicorn

    from threadline.engine import Engine
    from threadline.server.app import create_app

    engine = Engine(PostgresStore(url, max_connections=8), ScriptedModel(
        default=record_then_reply, token_delay_s=token_delay_s), tools=[ledger(url)])
    uvicorn.run(create_app(engine), host="127.0.0.1", port=port, log_level="error")


@dataclass
class Ack:
    conversation_id: str
    client_msg_id: str
    reply_seq: int


@dataclass
class Run:
    bases: list[str]
    conversations: list[str]
    total: int
    acks: list[Ack] = field(default_factory=list)
    rechecks: list[Ack] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    unacknowledged: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, outcome: str) -> None:
        with self.lock:
            self.statuses[outcome] += 1


def send(run: Run, http: httpx.Client, rng: random.Random, cid: str, msg_id: str,
         text: str, impatient: bool, deadline: float) -> Ack | None:
    body = {"text": text, "client_msg_id": msg_id}
    while time.monotonic() < deadline:
        base = rng.choice(run.bases)
        timeout = 0.005 if impatient else 60.0
        impatient = False
        try:
            response = http.post(f"{base}/v1/conversations/{cid}/messages", json=body,
                                 timeout=timeout)
        except httpx.TimeoutException:
            run.count("client gave up")
            continue
        except httpx.TransportError:
            run.count("connection failed")
            time.sleep(0.05)
            continue
        run.count(str(response.status_code))
        if response.status_code == 200:
            return Ack(cid, msg_id, response.json()["reply_seq"])
        if response.status_code in (409, 500, 502, 503):
            time.sleep(0.05 + rng.random() * 0.1)
            continue
        raise RuntimeError(f"unexpected {response.status_code}: {response.text}")
    return None


def client(run: Run, n: int, messages: int, impatience: float, retry_rate: float,
           deadline: float) -> None:
    rng = random.Random(n)
    with httpx.Client() as http:
        for k in range(messages):
            cid = rng.choice(run.conversations)
            msg_id = f"client-{n}-message-{k}"
            text = f"client {n} says {k}"
            ack = send(run, http, rng, cid, msg_id, text, rng.random() < impatience, deadline)
            if ack is None:
                with run.lock:
                    run.unacknowledged += 1
                continue
            with run.lock:
                run.acks.append(ack)
            if rng.random() < retry_rate:  # the client missed the answer and asks again
                again = send(run, http, rng, cid, msg_id, text, False, deadline)
                if again is not None:
                    with run.lock:
                        run.rechecks.append(again)


Replicas = tuple[list[subprocess.Popen[bytes]], list[str]]


def start_replicas(url: str, count: int, token_delay_s: float) -> Replicas:
    processes, bases = [], []
    for _ in range(count):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        processes.append(subprocess.Popen(
            [sys.executable, __file__, "--replica", "--database-url", url, "--port", str(port),
             "--token-delay", str(token_delay_s)]))
        bases.append(f"http://127.0.0.1:{port}")
    for base in bases:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"replica at {base} did not start")
    return processes, bases


def check(url: str, run: Run) -> dict[str, Any]:
    """What the database says, whatever the clients believe."""
    store = PostgresStore(url)
    try:
        forked, readable, unanswered, together = 0, True, 0, 0
        stored: Counter[str] = Counter()
        answers: Counter[tuple[str, int]] = Counter()
        for cid in run.conversations:
            try:
                history = store.history(cid)
            except Exception:  # noqa: BLE001 - unreadable is what this reports
                readable = False
                continue
            if len(store.branches(cid)) > 1 or verify_conversation(store, cid):
                forked += 1
            users = [i for i in history if i.kind is ItemKind.USER]
            stored.update(i.client_msg_id for i in users if i.client_msg_id)
            for call in store.calls(cid):
                if call.status is CallStatus.OK and call.purpose == "turn":
                    answers[cid, call.head_seq] += 1
            unanswered += history[-1].kind is ItemKind.USER if history else 0
            together += sum(a.kind is ItemKind.USER and b.kind is ItemKind.USER
                            for a, b in zip(history, history[1:], strict=False))
        lost = 0
        by_id = {}
        for ack in run.acks:
            message = store.find_client_message(ack.client_msg_id)
            reply_ok = True
            try:
                reply_ok = store.item(ack.conversation_id, ack.reply_seq).kind is \
                    ItemKind.ASSISTANT
            except Exception:  # noqa: BLE001 - a missing reply is a lost one
                reply_ok = False
            lost += message is None or not reply_ok
            by_id[ack.client_msg_id] = ack.reply_seq
        mismatched = sum(by_id.get(a.client_msg_id) != a.reply_seq for a in run.rechecks)
        with psycopg.connect(url) as conn:
            applied = conn.execute("SELECT entry, count(*) FROM chaos_ledger GROUP BY entry"
                                   ).fetchall()
            attempts = conn.execute("SELECT count(*) FROM chaos_attempts").fetchone()
        return {
            "lost": lost,
            "forked": forked,
            "duplicates": sum(n - 1 for n in stored.values() if n > 1) + mismatched,
            "duplicated_answers": sum(n - 1 for n in answers.values() if n > 1),
            "duplicated_side_effects": sum(n - 1 for _, n in applied if n > 1),
            "side_effects_applied": sum(n for _, n in applied),
            "side_effect_attempts": attempts[0] if attempts else 0,
            "readable": readable,
            "stored_messages": sum(stored.values()),
            "ending_unanswered": unanswered,
            "answered_with_the_next": together,
        }
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--messages", type=int, default=4, help="per client")
    parser.add_argument("--kill-at", type=float, default=0.3,
                        help="kill a replica once this share of messages is acknowledged")
    parser.add_argument("--impatience", type=float, default=0.2)
    parser.add_argument("--retry-rate", type=float, default=0.2)
    parser.add_argument("--token-delay", type=float, default=0.004, help="scripted model")
    parser.add_argument("--timeout", type=float, default=240.0, help="clients stop after")
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--quick", action="store_true", help="a tiny run for smoke tests")
    parser.add_argument("--json", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--replica", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replica:
        serve_replica(args.database_url, args.port, args.token_delay)
        return
    if args.quick:
        args.clients, args.conversations, args.messages = 6, 2, 2

    schema = f"chaos_{os.urandom(5).hex()}"
    admin = psycopg.connect(args.database_url, autocommit=True)
    admin.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in args.database_url else "?"
    url = f"{args.database_url}{separator}options=-csearch_path%3D{schema}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(LEDGER)
        processes, bases = start_replicas(url, args.replicas, args.token_delay)
        conversations = [httpx.post(f"{bases[0]}/v1/conversations", json={}).json()["id"]
                         for _ in range(args.conversations)]
        run = Run(bases, conversations, args.clients * args.messages)
        started = time.monotonic()
        deadline = started + args.timeout
        threads = [threading.Thread(target=client, args=(run, n, args.messages,
                                                         args.impatience, args.retry_rate,
                                                         deadline))
                   for n in range(args.clients)]
        for thread in threads:
            thread.start()
        killed: dict[str, Any] | None = None
        victim = processes[-1]
        while any(t.is_alive() for t in threads):
            if killed is None and args.replicas > 1 and \
                    len(run.acks) >= args.kill_at * run.total:
                victim.send_signal(signal.SIGKILL)
                killed = {"replica": len(processes) - 1, "after_acknowledged": len(run.acks),
                          "at_s": round(time.monotonic() - started, 2)}
                if not args.json:
                    print(f"killed replica {killed['replica']} after "
                          f"{killed['after_acknowledged']} acknowledgements", file=sys.stderr)
            time.sleep(0.01)
        seconds = time.monotonic() - started
        report = {"benchmark": "chaos", "replicas": args.replicas, "clients": args.clients,
                  "conversations": args.conversations, "messages": run.total,
                  "acknowledged": len(run.acks), "unacknowledged": run.unacknowledged,
                  **check(url, run), "killed": killed, "seconds": round(seconds, 2),
                  "acknowledged_per_s": round(len(run.acks) / seconds, 1),
                  "client_outcomes": dict(sorted(run.statuses.items())),
                  "rechecked": len(run.rechecks)}
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()
    print(json.dumps(report, indent=2))  # the run ends with one JSON object, --json or not


if __name__ == "__main__":
    main()
