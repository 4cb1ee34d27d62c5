"""SIGKILL in the middle of turns: every acknowledged turn is intact, nothing half-written."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from threadline.calls import CallStatus
from threadline.engine import Engine
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.verify import verify_conversation

CHILD = Path(__file__).with_name("crash_child.py")


@pytest.mark.slow
def test_sigkill_mid_turn_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    setup = SQLiteStore(db)
    cid = Engine(setup, ScriptedModel()).run_turn("start").conversation_id
    setup.close()
    rng = random.Random(20261129)
    acks: list[list[str]] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for round_ in range(14):
        child = subprocess.Popen([sys.executable, str(CHILD), str(db), cid, str(round_)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env)
        assert child.stdout is not None
        ready = child.stdout.readline()  # after its imports, however slow the machine is
        assert ready == "READY\n", child.communicate(timeout=30)[1]
        time.sleep(rng.uniform(0.3, 1.1))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, err
        acks += [line.split() for line in out.splitlines() if line.startswith("ACK ")]
    assert len(acks) > 50, "the children hardly ran; the test proves nothing"
    recovered = sum(ack[4] == "recovered" for ack in acks)
    print(f"{len(acks)} acknowledged turns, {recovered} interrupted turns recovered")

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    store = SQLiteStore(db)
    try:
        assert verify_conversation(store, cid) == []
        for _, message_seq, reply_seq, call_id, _ in acks:
            message = store.item(cid, int(message_seq))
            reply = store.item(cid, int(reply_seq))
            assert message.kind is ItemKind.USER
            assert reply.kind is ItemKind.ASSISTANT and reply.parent_seq == message.seq
            call = store.call(call_id)
            assert call.status is CallStatus.OK and call.reply_seq == reply.seq
            assert call.request is not None and call.request.messages[-1]["content"] == \
                message.text
        history = store.history(cid)
        replies = [i for i in history if i.kind is ItemKind.ASSISTANT]
        for reply in replies:  # no reply without the message it answers
            assert reply.parent_seq is not None
            assert store.item(cid, reply.parent_seq).kind is ItemKind.USER
        # at most the one in-flight turn per kill is left unanswered
        unanswered = [i for i, nxt in zip(history, [*history[1:], None], strict=True)
                      if i.kind is ItemKind.USER and (nxt is None or nxt.kind is ItemKind.USER)]
        assert len(unanswered) <= 1
    finally:
        store.close()
