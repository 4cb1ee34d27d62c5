"""Resumable streams: a reply's text is saved by generation id as it streams.

The first event of a stream names its generation; every ``delta`` event's id is
``GENERATION:OFFSET`` (characters so far). A client that lost its connection asks any replica
over the same store for ``/v1/generations/{id}/events`` with ``Last-Event-ID`` (or
``?offset=``) and gets the rest exactly once, then ``done``; the model is not run again. The
turn itself never depends on the client: it runs to its end in its own thread whether or not
anyone is still listening.
"""

from __future__ import annotations

import contextvars
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from threadline.engine import TurnResult
from threadline.errors import InputError, ThreadlineError
from threadline.items import new_id
from threadline.stores.base import Generation, Store

SAVE_EVERY_S = 0.1  # how stale the saved text may be while a reply streams


def pump(run: Callable[[Callable[[str], None]], TurnResult], *,
         on_text: Callable[[str], None] | None = None,
         on_end: Callable[[TurnResult | BaseException], None] | None = None
         ) -> Iterator[tuple[str, Any]]:
    """Start a turn in its own thread, now (not when first iterated: it runs even if the
    client leaves before the first piece), which finishes whether or not anyone keeps
    listening; the iterator yields ``("delta", text)`` for each piece, then
    ``("done", TurnResult)`` or ``("error", exception)``. ``on_text`` and ``on_end`` run in
    that thread."""
    pieces: queue.Queue[tuple[str, Any]] = queue.Queue()

    def each(piece: str) -> None:
        if on_text is not None:
            on_text(piece)
        pieces.put(("delta", piece))

    def work() -> None:
        outcome: TurnResult | BaseException
        try:
            outcome = run(each)
        except Exception as err:  # noqa: BLE001 - reported to the client in the stream
            outcome = err
        if on_end is not None:
            on_end(outcome)
        pieces.put(("error", outcome) if isinstance(outcome, BaseException) else
                   ("done", outcome))

    # in a copy of the caller's context: the turn's spans nest under the request's trace
    threading.Thread(target=contextvars.copy_context().run, args=(work,), daemon=True).start()
    return _drain(pieces)


def _drain(pieces: queue.Queue[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    while True:
        kind, value = pieces.get()
        yield kind, value
        if kind != "delta":
            return


def error_body(err: BaseException) -> dict[str, Any]:
    """The JSON error body every endpoint and stream uses."""
    if isinstance(err, ThreadlineError):
        body = {"type": type(err).__name__, "message": err.message, "hint": err.hint}
        return {"error": body if err.details is None else {**body, **err.details}}
    return {"error": {"type": type(err).__name__, "message": str(err), "hint": None}}


def live_events(run: Callable[[Callable[[str], None]], TurnResult], store: Store,
                conversation_id: str, clock: Callable[[], datetime]) -> Iterator[str]:
    generation_id = new_id("gen_")
    text: list[str] = []
    saved = [0.0]

    def save(done: bool = False, result: dict[str, Any] | None = None) -> None:
        store.save_generation(Generation(generation_id, conversation_id, "".join(text), done,
                                         result), clock())
        saved[0] = time.monotonic()

    def on_text(piece: str) -> None:
        text.append(piece)
        if time.monotonic() - saved[0] >= SAVE_EVERY_S:
            save()

    def on_end(outcome: TurnResult | BaseException) -> None:
        save(done=True, result=_outcome(outcome))

    save()
    yield _event("generation", {"generation_id": generation_id})
    offset = 0
    for kind, value in pump(run, on_text=on_text, on_end=on_end):
        if kind == "delta":
            offset += len(value)
            yield _event("delta", {"text": value}, f"{generation_id}:{offset}")
        else:
            outcome = _outcome(value)
            yield _event(outcome["event"], outcome["data"])


def _outcome(value: TurnResult | BaseException) -> dict[str, Any]:
    if isinstance(value, BaseException):
        return {"event": "error", "data": error_body(value)}
    return {"event": "done", "data": value.to_json()}


def resume_position(generation_id: str, last_event_id: str | None,
                    offset: int | None) -> int:
    """Where a resumed stream starts: ``?offset=``, else the offset in ``Last-Event-ID``."""
    if offset is not None:
        return offset
    if last_event_id is None:
        return 0
    gid, _, position = last_event_id.rpartition(":")
    if gid != generation_id or not position.isdigit():
        raise InputError(f"Last-Event-ID {last_event_id!r} is not an event of {generation_id}",
                         hint="send the id of the last delta event received, GENERATION:OFFSET")
    return int(position)


def resumed_events(store: Store, generation: Generation, offset: int, *,
                   poll_s: float = 0.05, timeout_s: float = 600.0) -> Iterator[str]:
    """The rest of a generation from ``offset``: what is saved now, then what follows until it
    is done (polling the store, so any replica can serve it)."""
    if offset > len(generation.text) and generation.done:
        raise InputError(f"offset {offset} is past the end of {generation.id} "
                         f"({len(generation.text)} characters)")
    started = time.monotonic()
    current: Generation | None = generation
    while current is not None:
        if len(current.text) > offset:
            yield _event("delta", {"text": current.text[offset:]},
                         f"{current.id}:{len(current.text)}")
            offset = len(current.text)
        if current.done:
            result = current.result or {"event": "error", "data": {}}
            yield _event(result["event"], result["data"])
            return
        if time.monotonic() - started > timeout_s:
            yield _event("error", {"error": {"type": "Timeout", "hint": None,
                                             "message": "the generation did not finish"}})
            return
        time.sleep(poll_s)
        current = store.generation(generation.id)


def _event(kind: str, data: Any, event_id: str | None = None) -> str:
    head = f"event: {kind}\n" + (f"id: {event_id}\n" if event_id else "")
    return f"{head}data: {json.dumps(data)}\n\n"
