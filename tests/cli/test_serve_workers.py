"""``threadline serve --workers N``: several processes on one port, one turn at a time per
conversation across them, a killed worker replaced without losing a turn; metrics refused
(each process would count only its own turns)."""

from __future__ import annotations

import importlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.cli.conftest import Invoke
from threadline.items import VISIBLE_ROLES, ItemKind
from threadline.stores.sqlite import SQLiteStore

serve_module = importlib.import_module("threadline.cli.serve")  # not the command


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Instead of listening: what uvicorn.run was asked to run. The environment serve hands
    its workers is restored afterwards."""
    monkeypatch.setenv(serve_module.WORKER_SPEC, "")
    monkeypatch.setenv("THREADLINE_HOME", "")
    runs: list[dict[str, Any]] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **options: runs.append(
        {"app": app, **options}))
    return runs


def test_workers_start_from_a_factory_each_builds_the_same_service(
        tl: Invoke, started: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    # this process is no worker: the watch for a dead parent would stop it
    monkeypatch.setattr("threadline.server.workers.stop_when_orphaned", lambda parent: None)
    run = tl("serve", "--workers", "3", "--no-ui")
    assert run.code == 0, run.err
    assert "3 worker processes" in run.err
    [options] = started
    assert options["workers"] == 3 and options["factory"] is True
    assert options["app"] == "threadline.cli.serve:worker_app"
    # what a worker builds: the service over the same data directory, the inspector left out
    client = TestClient(serve_module.worker_app())
    cid = client.post("/v1/conversations", json={}).json()["id"]
    reply = client.post(f"/v1/conversations/{cid}/messages", json={"text": "from a worker"})
    assert reply.status_code == 200 and reply.json()["turn"] == 1
    assert client.get("/ui").status_code == 404
    assert client.get("/metrics").status_code == 404


@pytest.mark.parametrize(("args", "env"), [(["--metrics"], {}),
                                           ([], {"THREADLINE_METRICS": "1"})])
def test_metrics_with_several_workers_are_refused_before_listening(
        tl: Invoke, started: list[dict[str, Any]], home: Path, args: list[str],
        env: dict[str, str]) -> None:
    run = tl("serve", "--workers", "2", *args, env=env)
    assert run.code != 0
    assert "metrics with --workers 2" in run.err and "--no-metrics" in run.err
    assert started == []


def test_a_bad_worker_count_is_refused(tl: Invoke, started: list[dict[str, Any]]) -> None:
    run = tl("serve", "--workers", "0")
    assert run.code == 2 and "--workers" in run.err
    assert started == []


def test_a_missing_model_fails_before_any_worker_starts(
        tl: Invoke, started: list[dict[str, Any]], tmp_path: Path) -> None:
    run = tl("serve", "--workers", "2", "--model", "local",
             env={"THREADLINE_MODEL_PATH": str(tmp_path / "absent.gguf")})
    assert run.code != 0 and "absent.gguf" in run.err
    assert started == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _workers_of(pid: int) -> list[int]:
    """The live worker processes under the server ``pid`` (not multiprocessing's resource
    tracker, nor a dead worker not yet reaped)."""
    return _children_of(pid, b"spawn_main")


def _children_of(pid: int, marked: bytes) -> list[int]:
    """The live processes ``pid`` started whose command line holds ``marked``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z" and marked in command:
                found.append(int(entry.name))
    return found


def _wait_for(check: Any, what: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if found := check():
                return found
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_two_workers_share_conversations_and_survive_a_killed_worker(tmp_path: Path) -> None:
    port, home = _free_port(), tmp_path / "home"
    env = {**os.environ, "THREADLINE_HOME": str(home), "THREADLINE_MODEL": "scripted"}
    server = subprocess.Popen([sys.executable, "-m", "threadline", "serve", "--workers", "2",
                               "--no-metrics", "--no-ui", "--port", str(port)], env=env,
                              stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "the service")
        workers = _wait_for(lambda: len(found := _workers_of(server.pid)) >= 2 and found,
                            "two workers")
        cids = [httpx.post(f"{base}/v1/conversations", json={}).json()["id"]
                for _ in range(3)]
        failures: list[BaseException] = []

        def client(cid: str, name: str, turns: int) -> None:
            try:
                with httpx.Client(base_url=base, timeout=60) as http:
                    for k in range(turns):
                        body = {"text": f"{name} {k}", "client_msg_id": f"{cid}-{name}-{k}"}
                        _sent_until_answered(http, f"/v1/conversations/{cid}/messages", body)
            except BaseException as err:  # noqa: BLE001 - reported below
                failures.append(err)

        # two clients per conversation: their turns meet on different workers
        threads = [threading.Thread(target=client, args=(cid, f"c{n}", 6))
                   for cid in cids for n in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(0.3)
        os.kill(workers[0], signal.SIGKILL)  # mid-run: its connections drop, not the log
        for thread in threads:
            thread.join()
        assert failures == []
        # the dead worker has been replaced, and the service answers on
        _wait_for(lambda: workers[0] not in (found := _workers_of(server.pid))
                  and len(found) >= 2, "a replacement worker")
        for cid in cids:
            assert httpx.post(f"{base}/v1/conversations/{cid}/messages",
                              json={"text": "after"}, timeout=60).status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=20)
    store = SQLiteStore(home / "threadline.db")
    try:
        for cid in cids:
            history = [item for item in store.history(cid) if item.kind in VISIBLE_ROLES]
            asked = [item.text for item in history if item.kind == ItemKind.USER]
            # each message once, however many times it was sent, whichever worker took it
            assert sorted(asked[:-1]) == sorted(f"c{n} {k}" for n in range(2) for k in range(6))
            assert asked[-1] == "after"
            # one turn at a time: turn numbers in order, and no answer given twice
            turns = [item.turn for item in history if item.kind == ItemKind.USER]
            assert turns == sorted(turns) and len(set(turns)) == len(turns)
            kinds = [item.kind for item in history]
            assert all(not (a == b == ItemKind.ASSISTANT) 
                       for a, b in itertools.pairwise(kinds))
            assert kinds[-1] == ItemKind.ASSISTANT
    finally:
        store.close()


def _sent_until_answered(http: httpx.Client, path: str, body: dict[str, str]) -> None:
    """POST until answered: a request whose worker was killed is sent again with the same
    ``client_msg_id``, which the service answers once."""
    for _ in range(10):
        try:
            response = http.post(path, json=body, headers={"Connection": "close"})
        except httpx.TransportError:
            time.sleep(0.2)
            continue
        response.raise_for_status()
        return
    raise AssertionError(f"never answered: {body}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_of_a_killed_serve_stop_and_free_the_port(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "THREADLINE_HOME": str(tmp_path / "home"),
           "THREADLINE_MODEL": "scripted"}
    server = subprocess.Popen([sys.executable, "-m", "threadline", "serve", "--workers", "2",
                               "--no-metrics", "--port", str(port)], env=env,
                              stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200,
                  "the service")
        workers = _wait_for(lambda: len(found := _workers_of(server.pid)) >= 2 and found,
                            "two workers")
    finally:
        server.kill()  # no chance to stop its workers itself
        server.wait(timeout=10)
    _wait_for(lambda: not any(Path(f"/proc/{pid}").exists()
                              and "Z" not in _state(pid) for pid in workers),
              "the orphaned workers to stop", timeout_s=20)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # nothing holds the port any more


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_each_worker_exports_its_turns_through_a_relay_of_its_own(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="install the otel extra")
    from threadline.tracing.receiver import OTLPReceiver

    port = _free_port()
    with OTLPReceiver() as receiver:
        env = {**os.environ, "THREADLINE_HOME": str(tmp_path / "home"),
               "THREADLINE_MODEL": "scripted", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        server = subprocess.Popen([sys.executable, "-m", "threadline", "serve", "--workers",
                                   "2", "--no-metrics", "--no-ui", "--port", str(port)],
                                  env=env, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "the service")
            workers = _wait_for(lambda: len(found := _workers_of(server.pid)) >= 2 and found,
                                "two workers")
            relays = _wait_for(lambda: len(found := _relays_of(workers)) >= 2 and found,
                               "a relay per worker")
            replies = []
            for n in range(8):  # a connection each: uvicorn spreads them over the workers
                cid = httpx.post(f"{base}/v1/conversations", json={}).json()["id"]
                replies.append(httpx.post(f"{base}/v1/conversations/{cid}/messages",
                                          json={"text": f"turn {n}"}, timeout=60).json())
            # exported while the service runs (each worker's recorder hands over every 0.5 s)
            spans = receiver.wait_for(
                lambda got: sum(s.name == "threadline.turn" for s in got) >= 8)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=20)
    turns = [s for s in spans if s.name == "threadline.turn"]
    assert sorted(t.attributes["gen_ai.conversation.id"] for t in turns) == sorted(
        r["conversation_id"] for r in replies)
    assert len(set(relays)) == 2


def _relays_of(workers: list[int]) -> list[int]:
    return [relay for worker in workers
            for relay in _children_of(worker, b"threadline.tracing.relay")]
