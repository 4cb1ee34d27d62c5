"""Trace context from incoming HTTP requests: the span a caller sent (W3C ``traceparent``,
or whatever ``OTEL_PROPAGATORS`` configures) becomes the parent of the turn it asks for.

A plain ASGI middleware: the extracted context is current while the request is served, and
the sync handlers and the streaming thread run in a copy of it (``server/streams.py``), so a
turn's span is a child of the caller's whether it answers in JSON or as a stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opentelemetry import context, propagate

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TraceContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {name.decode("latin-1"): value.decode("latin-1")
                   for name, value in scope.get("headers", ())}
        token = context.attach(propagate.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            context.detach(token)
