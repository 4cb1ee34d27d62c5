"""What ``threadline serve --workers N`` adds to each of uvicorn's worker processes.

``NoDelayHTTP``: the HTTP protocol uvicorn would choose (httptools where installed, else h11),
which turns Nagle's algorithm off on each connection. Uvicorn's workers accept on a socket the
supervisor bound with ``proto`` 0, so asyncio leaves ``TCP_NODELAY`` unset, and on Linux every
keep-alive request after a connection's first waits about 40 ms for the client's delayed ACK
(uvicorn issue #3149; a lone process binds through ``getaddrinfo`` and is not affected).

``stop_when_orphaned``: a worker whose supervisor was killed shuts down, rather than keep
the port.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Chosen
except ImportError:  # uvicorn's own choice without httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Chosen  # type: ignore[assignment]

NO_DELAY_HTTP = f"{__name__}:NoDelayHTTP"  # as uvicorn's ``http`` setting names it


class NoDelayHTTP(_Chosen):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


def stop_when_orphaned(parent: int, every_s: float = 1.0) -> None:
    """Shut this worker down (as SIGTERM does: running turns finish) once ``parent``, the
    process that started it, is gone."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os.kill(os.getpid(), signal.SIGTERM)
