"""What the service refuses before any handler runs, in the one JSON error shape.

- A request body over the limit is refused with 413 as soon as it is known to be too large
  (from ``Content-Length``, or while reading a body sent without one), before it is parsed.
- A JSON body that is not UTF-8 is refused with 400 and says so, instead of a parse error.
- A body that does not match the OpenAPI schema (malformed JSON, a missing field, a wrong
  type) is refused with 422 and a message naming each field and what was wrong with it.
- Any other HTTP error the framework raises (405, unknown paths) keeps its status and gets the
  same ``{"error": {"type", "message", "hint"}}`` body.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_SPEC_HINT = "the request schema is at /openapi.json"


def error(status: int, kind: str, message: str, hint: str | None = None) -> JSONResponse:
    return JSONResponse(status_code=status,
                        content={"error": {"type": kind, "message": message, "hint": hint}})


class BodyGuard:
    """ASGI middleware: bounds and checks request bodies before the framework parses them."""

    def __init__(self, app: App, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
            if not message.get("more_body"):
                break
        if "json" in headers.get("content-type", ""):
            try:
                bytes(body).decode("utf-8")
            except UnicodeDecodeError as err:
                await error(400, "InvalidEncoding", f"the request body is not valid UTF-8 "
                            f"(byte {err.start}); nothing was saved",
                            "send JSON encoded as UTF-8")(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: wait for a disconnect, as usual
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error(413, "RequestTooLarge", f"the request body is over the limit of "
                    f"{self.max_body_bytes:,} bytes; nothing was saved",
                    "send a shorter message")(scope, receive, send)


def install(app: FastAPI, *, max_body_bytes: int) -> None:
    """Add the body guard and the JSON error shape for the framework's own errors."""
    app.add_middleware(BodyGuard, max_body_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = []
        for found in err.errors():
            where = ".".join(str(part) for part in found.get("loc", ()) if part != "body")
            if found.get("type") == "json_invalid":
                detail = found.get("ctx", {}).get("error", "")
                problems.append(f"the body is not valid JSON ({detail})")
            else:
                problems.append(f"{where or 'body'}: {found.get('msg', 'invalid')}")
        return error(422, "InvalidRequest", "; ".join(problems) + "; nothing was saved",
                     _SPEC_HINT)

    @app.exception_handler(HTTPException)
    def _http(_: Request, err: HTTPException) -> JSONResponse:
        detail = err.detail if isinstance(err.detail, str) else json.dumps(err.detail)
        response = error(err.status_code, "HTTPError", detail, _SPEC_HINT)
        for name, value in (err.headers or {}).items():
            response.headers[name] = value
        return response
