"""Runs turns forever on one conversation, acknowledging each on stdout; the crash test kills
it with SIGKILL at a random moment. Usage: crash_child.py DB CONVERSATION SEED"""

from __future__ import annotations

import random
import sys

from threadline.engine import Engine
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.lease import LeasePolicy


def main() -> None:
    db, conversation_id, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    # some rounds spend their time in the model, others almost only in commits
    slow = rng.random() < 0.5
    model = ScriptedModel(first_token_delay_s=0.01 if slow else 0.0,
                          token_delay_s=0.001 if slow else 0.0)
    # a short lease: the next child must not wait long for the one this kill leaves behind
    engine = Engine(SQLiteStore(db), model, lease=LeasePolicy(ttl_s=0.3, heartbeat_s=0.1))
    print("READY", flush=True)  # imported and open: the test's timer starts now
    head = engine.store.head(conversation_id)
    if head is not None and head.kind is ItemKind.USER:  # a turn the last crash interrupted
        result = engine.answer(conversation_id)
        print(f"ACK {result.message.seq} {result.reply.seq} {result.call.id} recovered",
              flush=True)
    turn = 0
    while True:
        turn += 1
        client_id = f"{seed}-{turn}"
        text = f"message {client_id} " + "x" * rng.randint(0, 3000)
        result = engine.run_turn(text, conversation_id=conversation_id, client_msg_id=client_id)
        print(f"ACK {result.message.seq} {result.reply.seq} {result.call.id} {client_id}",
              flush=True)


if __name__ == "__main__":
    main()
