"""Load: turns per second and latency of the HTTP service versus a bare FastAPI handler.

What is measured
    Two servers per store, each in its own process, served by uvicorn the same way:

    threadline  ``POST /v1/conversations/{id}/messages`` of the threadline service: the lease,
                ingest (the user message committed), assembly, the scripted model (no delay:
                its time is not the service's), the reply and its call record committed, the
                lease released
    bare        a FastAPI handler on the same path that writes one row per request in one
                transaction on the same store (SQLite WAL with ``synchronous=FULL``, or the
                same PostgreSQL database through a psycopg pool) and answers JSON

    With ``--workers N`` each server is N uvicorn worker processes sharing its port (as
    ``threadline serve --workers N`` runs), its CPU summed over them.

    With ``--http-floor`` a third server runs in the same rounds: threadline's service whose
    engine answers each conversation's later messages with its first turn's result again,
    running no turn: what threadline's HTTP path costs (routing, the token and body guards,
    the thread pool, the JSON) apart from the turn, so that the server CPU per turn splits
    into the two.

    ``--clients`` client threads each own one conversation and send ``--turns`` messages one
    after another; the two servers are measured in alternating rounds of ``--round`` turns per
    client so drift hits both. Reported per store: turns/s, p50 and p99 latency per turn, the
    throughput ratio (threadline ÷ bare), the latency threadline adds at p50 and p99, and each
    server process's CPU time per turn (user + system, from /proc), which the clients and
    other work on the machine do not blur, and the client process's (all its threads): on a
    machine with few cores the two share them, so the throughput ratio is bounded by
    (bare server + client CPU) ÷ (threadline server + client CPU) per turn.

    .venv/bin/python bench/load.py
    .venv/bin/python bench/load.py --stores sqlite --workers 2
    .venv/bin/python bench/load.py --stores sqlite --http-floor
    .venv/bin/python bench/load.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

DEFAULT_URL = os.environ.get("THREADLINE_TEST_DATABASE_URL",
                             "postgresql://postgres@127.0.0.1:5432/test")


class Message(BaseModel):
    text: str


def bare_app(store: str, where: str) -> Any:
    """The baseline: one row per request, one transaction, JSON back."""
    from fastapi import FastAPI

    app = FastAPI()
    if store == "sqlite":
        conn = sqlite3.connect(where, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, "
                     "conversation_id TEXT, text TEXT, created_at REAL)")
        lock = threading.Lock()

        def write(cid: str, text: str) -> int:
            with lock:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute("INSERT INTO rows (conversation_id, text, created_at) "
                                   "VALUES (?, ?, ?) RETURNING id",
                                   (cid, text, time.time())).fetchone()
                conn.execute("COMMIT")
                return int(row[0])
    else:
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(where, min_size=1, max_size=8, open=True)
        with pool.connection() as c:
            c.execute("CREATE TABLE IF NOT EXISTS rows (id bigserial PRIMARY KEY, "
                      "conversation_id text, text text, created_at double precision)")

        def write(cid: str, text: str) -> int:
            with pool.connection() as c, c.transaction():
                row = c.execute("INSERT INTO rows (conversation_id, text, created_at) "
                                "VALUES (%s, %s, %s) RETURNING id",
                                (cid, text, time.time())).fetchone()
                assert row is not None
                return int(row[0])

    @app.post("/v1/conversations/{cid}/messages")
    def post(cid: str, message: Message) -> dict[str, Any]:
        return {"conversation_id": cid, "seq": write(cid, message.text)}

    @app.post("/v1/conversations", status_code=201)
    def create() -> dict[str, Any]:
        return {"id": f"c_{os.urandom(8).hex()}"}

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def threadline_app(store: str, where: str, *, turns: bool = True) -> Any:
    """The service; without ``turns``, each conversation's first turn result is returned for
    every later message (the HTTP path alone)."""
    from threadline.engine import Engine
    from threadline.models.scripted import ScriptedModel
    from threadline.server.app import create_app
    from threadline.stores.base import Store

    backend: Store
    if store == "sqlite":
        from threadline.stores.sqlite import SQLiteStore

        backend = SQLiteStore(where)
    else:
        from threadline.stores.postgres import PostgresStore

        backend = PostgresStore(where, max_connections=8)
    engine = Engine(backend, ScriptedModel())
    if not turns:
        first: dict[str | None, Any] = {}
        run_turn = engine.run_turn

        def replayed(text: str, *, conversation_id: str | None = None, **options: Any) -> Any:
            if conversation_id not in first:
                first[conversation_id] = run_turn(text, conversation_id=conversation_id,
                                                  **options)
            return first[conversation_id]

        engine.run_turn = replayed  # type: ignore[method-assign]
    return create_app(engine)


SERVED = "THREADLINE_LOAD_SERVED"  # kind, store, where: what each worker process builds


def served_app() -> Any:
    """The app ``serve`` described in the environment (uvicorn's factory, in each worker)."""
    kind, store, where = json.loads(os.environ[SERVED])
    if kind == "bare":
        return bare_app(store, where)
    return threadline_app(store, where, turns=kind == "threadline")


def serve(kind: str, store: str, where: str, port: int, workers: int) -> None:
    """Serve with uvicorn: in this process, or in ``workers`` processes sharing the port (as
    ``threadline serve --workers`` does)."""
    import uvicorn

    os.environ[SERVED] = json.dumps([kind, store, where])
    if workers == 1:
        uvicorn.run(served_app(), host="127.0.0.1", port=port, log_level="error")
    else:
        from threadline.server.workers import NO_DELAY_HTTP

        uvicorn.run(f"{Path(__file__).stem}:served_app", factory=True, workers=workers,
                    app_dir=str(Path(__file__).parent), host="127.0.0.1", port=port,
                    http=NO_DELAY_HTTP, log_level="error")


def start(kind: str, store: str, where: str,
          workers: int) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, __file__, "--serve", kind, "--store", store,
                                "--where", where, "--port", str(port),
                                "--workers", str(workers)])
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the {kind} server on {store} did not start")


def drive(base: str, conversations: list[str], turns: int, offset: int) -> list[float]:
    """Every client sends ``turns`` messages to its conversation; the latencies in ms."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one_client(cid: str) -> None:
        try:
            with httpx.Client(base_url=base, timeout=60) as http:
                mine = []
                for k in range(turns):
                    began = time.perf_counter()
                    response = http.post(f"/v1/conversations/{cid}/messages",
                                         json={"text": f"message {offset + k}: " + "x" * 200})
                    mine.append((time.perf_counter() - began) * 1000)
                    response.raise_for_status()
            with lock:
                latencies.extend(mine)
        except BaseException as err:  # raised below, in the caller's thread
            errors.append(err)

    threads = [threading.Thread(target=one_client, args=(cid,)) for cid in conversations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return latencies


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a server has used so far (Linux), its worker processes
    included: less noisy than wall time on a shared machine, and it counts only the server,
    not the clients."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


HTTP_FLOOR = "threadline_http"  # the service running no turn (``--http-floor``)


def measure(store: str, where: dict[str, str], clients: int, turns: int,
            round_size: int, workers: int) -> dict[str, Any]:
    """``where``: each server's store, by kind (threadline, bare, and the HTTP floor if
    there)."""
    kinds = [kind for kind in ("threadline", "bare", HTTP_FLOOR) if kind in where]
    servers = {kind: start(kind, store, where[kind], workers) for kind in kinds}
    try:
        conversations = {kind: [httpx.post(f"{base}/v1/conversations", json={}).json()["id"]
                                for _ in range(clients)]
                         for kind, (_, base) in servers.items()}
        for kind, (_, base) in servers.items():  # warm up: connections, caches, imports
            drive(base, conversations[kind], 3, -3)
        latencies: dict[str, list[float]] = {kind: [] for kind in kinds}
        seconds = dict.fromkeys(kinds, 0.0)
        cpu = dict.fromkeys(kinds, 0.0)
        client = dict.fromkeys(kinds, 0.0)
        for n, offset in enumerate(range(0, turns, round_size)):
            order = kinds if n % 2 == 0 else kinds[::-1]
            for kind in order:
                began, used = time.perf_counter(), cpu_seconds(servers[kind][0].pid)
                mine = os.times()
                latencies[kind] += drive(servers[kind][1], conversations[kind],
                                         min(round_size, turns - offset), offset)
                seconds[kind] += time.perf_counter() - began
                cpu[kind] += cpu_seconds(servers[kind][0].pid) - used
                done = os.times()
                client[kind] += done.user - mine.user + done.system - mine.system
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=10)
    result: dict[str, Any] = {}
    for kind in kinds:
        ordered = sorted(latencies[kind])
        result[kind] = {"turns_per_s": round(len(ordered) / seconds[kind], 1),
                        "p50_ms": round(statistics.median(ordered), 2),
                        "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 2),
                        "server_cpu_ms_per_turn": round(1000 * cpu[kind] / len(ordered), 3),
                        "client_cpu_ms_per_turn": round(1000 * client[kind] / len(ordered), 3)}
    t, b = result["threadline"], result["bare"]
    result["throughput_ratio"] = round(t["turns_per_s"] / b["turns_per_s"], 2)
    result["added_p50_ms"] = round(t["p50_ms"] - b["p50_ms"], 2)
    result["added_p99_ms"] = round(t["p99_ms"] - b["p99_ms"], 2)
    # None where the bare server used less than a clock tick (a --quick run)
    result["cpu_ratio"] = round(t["server_cpu_ms_per_turn"] / b["server_cpu_ms_per_turn"], 2) \
        if b["server_cpu_ms_per_turn"] else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--turns", type=int, default=100, help="per client")
    parser.add_argument("--round", type=int, default=10, help="turns per client per round")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes sharing each port (both servers alike)")
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--http-floor", action="store_true",
                        help="also serve threadline running no turn (its HTTP path alone)")
    parser.add_argument("--quick", action="store_true", help="a tiny run for smoke tests")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", choices=["threadline", "bare", HTTP_FLOOR],
                        help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--where", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.store, args.where, args.port, args.workers)
        return
    if args.quick:
        args.clients, args.turns, args.round = 2, 4, 2
    report: dict[str, Any] = {"benchmark": "load", "clients": args.clients,
                              "workers": args.workers,
                              "turns_per_client": args.turns, "stores": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for store in args.stores.split(","):
            if store == "sqlite":
                where = {"threadline": str(Path(tmp) / "threadline.db"),
                         "bare": str(Path(tmp) / "bare.db")}
                if args.http_floor:
                    where[HTTP_FLOOR] = str(Path(tmp) / "floor.db")
                report["stores"][store] = measure(store, where, args.clients, args.turns,
                                                  args.round, args.workers)
            else:
                report["stores"][store] = with_postgres(args, store)
            if not args.json:
                print(f"{store}: {json.dumps(report['stores'][store])}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{'store':10} {'server':15} {'turns/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'server CPU ms/turn':>19} {'client CPU ms/turn':>19}")
    for store, found in report["stores"].items():
        for kind in ("threadline", "bare", HTTP_FLOOR):
            if kind not in found:
                continue
            row = found[kind]
            print(f"{store:10} {kind:15} {row['turns_per_s']:8.1f} {row['p50_ms']:8.2f} "
                  f"{row['p99_ms']:8.2f} {row['server_cpu_ms_per_turn']:19.3f} "
                  f"{row['client_cpu_ms_per_turn']:19.3f}")
        print(f"{store:10} threadline/bare throughput {found['throughput_ratio']:.2f}, adds "
              f"{found['added_p50_ms']:.2f} ms at p50 and {found['added_p99_ms']:.2f} ms at p99; "
              + ("" if found["cpu_ratio"] is None else
                 f"server CPU per turn {found['cpu_ratio']:.2f}x the bare handler's"))


def with_postgres(args: argparse.Namespace, store: str) -> dict[str, Any]:
    """A run on fresh schemas of their own, dropped afterwards."""
    import psycopg

    from threadline.stores.postgres import migrate

    kinds = ("threadline", "bare", *([HTTP_FLOOR] if args.http_floor else []))
    names = {kind: f"load_{kind}_{os.urandom(4).hex()}" for kind in kinds}
    separator = "&" if "?" in args.database_url else "?"
    where = {kind: f"{args.database_url}{separator}options=-csearch_path%3D{name}"
             for kind, name in names.items()}
    with psycopg.connect(args.database_url, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f"CREATE SCHEMA {name}")
        try:
            for kind in where.keys() - {"bare"}:
                migrate(where[kind])
            return measure(store, where, args.clients, args.turns, args.round, args.workers)
        finally:
            for name in names.values():
                admin.execute(f"DROP SCHEMA {name} CASCADE")


if __name__ == "__main__":
    main()
