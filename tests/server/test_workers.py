"""What each ``serve --workers`` process adds: TCP_NODELAY on every connection (uvicorn's
workers accept on a socket whose ``proto`` is 0, so asyncio leaves Nagle's algorithm on and
each keep-alive request waits ~40 ms for a delayed ACK)."""

from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from threadline.server.workers import NoDelayHTTP, _Chosen


async def _app(scope: Any, receive: Any, send: Any) -> None:
    return None


async def _no_delay_after_accepting(protocol_class: type[asyncio.Protocol]) -> int:
    config = uvicorn.Config(_app)
    config.load()
    # proto 0, as the listener uvicorn's supervisor hands its workers
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()):
            accepted, _ = listener.accept()
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
            protocol = protocol_class(config, ServerState(), {})  # type: ignore[call-arg]
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
                lambda: protocol, sock=accepted)
            try:
                return accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            finally:
                transport.close()


@pytest.mark.parametrize(("protocol", "no_delay"), [(_Chosen, 0), (NoDelayHTTP, 1)])
def test_each_connection_gets_tcp_nodelay(protocol: type[asyncio.Protocol],
                                          no_delay: int) -> None:
    # a loop of its own, in a thread of its own: another test may leave one running here
    with ThreadPoolExecutor(1) as thread:
        found = thread.submit(asyncio.run, _no_delay_after_accepting(protocol)).result()
    assert bool(found) == bool(no_delay)
