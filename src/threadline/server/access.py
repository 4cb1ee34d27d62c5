"""Who is asking, and what they may reach: bearer tokens over the whole service.

Tokens are required when the service was started requiring them (``threadline serve`` does
for any host that is not loopback, and with ``--require-tokens``) or when any token that is
not revoked exists. Then every request but the public paths (``/healthz``, and the OpenAPI
spec and its documentation pages, which hold no data) needs ``Authorization: Bearer SECRET``,
checked against the store on every request, so a revoked token stops working at once on
every replica. A missing, unknown or revoked token is refused with 401 and
``WWW-Authenticate: Bearer`` before the request is read. Otherwise the service is open, as on
a developer's own machine: every caller acts as admin, and a bearer header is ignored (an
OpenAI client always sends one).

What a token reaches:

- an admin token: everything, every user's.
- a user token: the conversations its user owns (created with that user's token, or by an
  admin with ``owner``) with their branches, forks, calls and generation streams, and that
  user's memory. A conversation that is no one's (created by an admin or while the service
  was open) is admin only. Lists show only the user's own.
- Another user's conversation, call, stream or memory is refused with 403 ``Forbidden``; one
  that does not exist is 404 as for anyone. 403 rather than 404 is safe to say because these
  ids are random (80 bits): it tells nothing to someone who does not already hold the id.
- A ``user_id`` or ``owner`` in a request must be the token's user (403 otherwise). A new
  conversation's owner left out is the token's user; a message's ``user_id`` left out is
  none, as without tokens (naming a user turns memory on for the turn).

Every check runs before anything is written, so a refused request changes nothing.

Browsers (the inspector's pages under ``/ui``) cannot send a bearer header when they follow a
link, so for those paths only the guard also takes the token from the ``threadline_token``
cookie, which the inspector's login page sets (HttpOnly, SameSite=Strict, Path=/ui). No other
path reads it: an API route acts only on a header a page cannot make a browser send, so a
cross-site request cannot ride the cookie onto the API. Refused under ``/ui``, a page
navigation (a GET asking for HTML) is sent to the login page instead of a 401; the login page
and the static files (which hold no data) are open to anyone.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from threadline.calls import ModelCall
from threadline.errors import (
    ClientMessageConflict,
    Forbidden,
    InputError,
    StoreError,
    Unauthorized,
    UnknownConversation,
)
from threadline.items import Conversation, format_time
from threadline.server.guards import App, Receive, Scope, Send
from threadline.server.streams import error_body
from threadline.stores.base import Generation, Store
from threadline.stores.tokens import TokenBackend, secret_hash

# paths anyone may read: they hold no data (the spec is the same for every install)
PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect",
                          "/redoc"})
CHALLENGE = 'Bearer realm="threadline"'
_CALLER = "threadline.caller"  # where the guard leaves the caller in the request's scope
BROWSER_PREFIX = "/ui"  # the inspector's pages: the only paths that read the cookie
SESSION_COOKIE = "threadline_token"
LOGIN_PATH = BROWSER_PREFIX + "/login"
_BROWSER_OPEN = (LOGIN_PATH, BROWSER_PREFIX + "/static/")  # hold no data
_HINT = ("send 'Authorization: Bearer SECRET'; an operator creates one with: threadline "
         "tokens create --user ID")


@dataclass(frozen=True)
class Caller:
    """The token a request came with: a user's (``user_id``), or an admin's (None). An open
    service's callers are admins without a token."""

    user_id: str | None
    token_id: str | None

    @property
    def admin(self) -> bool:
        return self.user_id is None

    def may_use(self, owner: str | None) -> bool:
        return self.admin or owner == self.user_id

    def acting_for(self, claimed: str | None, field: str) -> str | None:
        """The user a request acts for: ``claimed`` (a body's or path's user) if the token may
        act for them, the token's own user when nothing was claimed."""
        if self.admin:
            return claimed
        if claimed is not None and claimed != self.user_id:
            raise Forbidden(f"this token is {self.user_id!r}'s, and {field} {claimed!r} is "
                            "another user; nothing was read or saved",
                            hint=f"use a token of {claimed!r}'s, or an admin token")
        return self.user_id


OPEN = Caller(user_id=None, token_id=None)


# -- what a route calls before it reads or writes ---------------------------------------------

def conversation(caller: Caller, store: Store, conversation_id: str, *,
                 named: str | None = None) -> Conversation:
    """The conversation, if the caller may use it (UnknownConversation, else Forbidden).
    ``named`` is what the request named, if not the conversation: a refusal names only that,
    never the conversation it belongs to."""
    found = store.conversation(conversation_id)
    if not caller.may_use(found.owner):
        raise Forbidden(f"{named or f'conversation {conversation_id}'} is not "
                        f"{caller.user_id!r}'s; nothing was read or saved",
                        hint="a user token reaches only its own user's conversations")
    return found


def call(caller: Caller, store: Store, call_id: str) -> ModelCall:
    found = store.call(call_id)
    conversation(caller, store, found.conversation_id, named=f"call {call_id}")
    return found


def generation(caller: Caller, store: Store, found: Generation) -> Generation:
    conversation(caller, store, found.conversation_id, named=f"generation {found.id}")
    return found


def client_message(caller: Caller, store: Store, client_msg_id: str | None) -> None:
    """Refuse, without naming it, a client message id that another user's conversation
    already used: the engine's own refusal says which conversation holds it."""
    if caller.admin or client_msg_id is None:
        return
    seen = store.find_client_message(client_msg_id)
    if seen is None:
        return
    try:
        owner = store.conversation(seen.conversation_id).owner
    except UnknownConversation:
        return  # deleted meanwhile, with its messages: the id is free again
    if not caller.may_use(owner):
        raise ClientMessageConflict(client_msg_id, "another message")


# -- authentication ---------------------------------------------------------------------------

class TokenGuard:
    """ASGI middleware: decides who the caller is before the request is read, and refuses
    with 401 when tokens are required and the request has no valid one."""

    def __init__(self, app: App, tokens: TokenBackend | None, required: bool) -> None:
        self.app, self.tokens, self.required = app, tokens, required
        self.in_place = tokens is None or tokens.in_place

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _route_path(scope) in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        path = _route_path(scope)
        browser = _under(path, BROWSER_PREFIX)
        header = _header(scope, b"authorization")
        if header is None and browser:
            secret = _cookie(scope, SESSION_COOKIE)
            header = None if secret is None else f"Bearer {secret}"
        try:  # the store is synchronous: look up away from the event loop, unless it
            # reads in place (a local read that waits on nothing)
            found = self.authenticate(header) if self.in_place \
                else await run_in_threadpool(self.authenticate, header)
        except StoreError as err:  # the database is unreachable: as every route says it
            await JSONResponse(status_code=503, content=error_body(err))(scope, receive, send)
            return
        if isinstance(found, Unauthorized):
            if browser and any(path == p or (p.endswith("/") and path.startswith(p))
                               for p in _BROWSER_OPEN):
                await self.app(scope, receive, send)  # the login page: no caller
            elif browser and _navigation(scope):
                await _to_login(scope, path)(scope, receive, send)
            else:
                await refusal(found)(scope, receive, send)
            return
        scope[_CALLER] = found
        await self.app(scope, receive, send)

    def authenticate(self, header: str | None) -> Caller | Unauthorized:
        scheme, _, secret = (header or "").strip().partition(" ")
        secret = secret.strip() if scheme.lower() == "bearer" else ""
        token = None
        if secret and self.tokens is not None:
            token = self.tokens.find(secret_hash(secret))
            if token is not None and token.active:
                return Caller(token.user_id, token.id)
        if not self.required and (self.tokens is None or not self.tokens.any_active()):
            return OPEN
        if not secret:
            return Unauthorized("this service needs a bearer token, and the request has none",
                                hint=_HINT)
        if token is None:
            return Unauthorized("the bearer token is not one this service issued",
                                hint=_HINT)
        assert token.revoked_at is not None
        return Unauthorized(f"the bearer token {token.id} was revoked at "
                            f"{format_time(token.revoked_at)}", hint=_HINT)


def refusal(err: Unauthorized) -> JSONResponse:
    """The 401 response: the JSON error, and the challenge RFC 6750 asks for."""
    return JSONResponse(status_code=401, content=error_body(err),
                        headers={"WWW-Authenticate": CHALLENGE})


def caller_in(scope: MutableMapping[str, Any]) -> Caller | None:
    """The caller the guard found for a request's ``scope``; None where it found none (a
    public path)."""
    found = scope.get(_CALLER)
    return found if isinstance(found, Caller) else None


_bearer = HTTPBearer(auto_error=False, description="A token from `threadline tokens create`.")


async def current_caller(request: Request,
                   _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
                   ) -> Caller:
    """The caller the guard found (the bearer dependency only declares the scheme in the
    OpenAPI spec). A route reached without the guard refuses: a public path with data is a
    mistake, and this keeps it closed."""
    found = request.scope.get(_CALLER)
    if not isinstance(found, Caller):
        raise Unauthorized("this path is public and cannot act for a caller", hint=_HINT)
    return found


CallerDep = Annotated[Caller, Depends(current_caller)]


def install(app: FastAPI, tokens: TokenBackend | None, *, required: bool) -> None:
    """Add the guard; call it after the other middleware, so it runs first."""
    if required and tokens is None:
        raise InputError("this store keeps no tokens, so the service cannot require them",
                         hint="serve a SQLite or PostgreSQL store")
    app.add_middleware(TokenGuard, tokens=tokens, required=required)


def _header(scope: MutableMapping[str, Any], name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope.get("headers", [])
                 if k.lower() == name), None)


def _cookie(scope: MutableMapping[str, Any], name: str) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for header in (v for k, v in headers if k.lower() == b"cookie"):
        for pair in header.decode("latin-1").split(";"):
            key, _, value = pair.strip().partition("=")
            if key == name and value:
                return value.strip('"')
    return None


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def _navigation(scope: MutableMapping[str, Any]) -> bool:
    """A browser following a link or typing the address: a GET that asks for HTML."""
    return scope.get("method") == "GET" and "text/html" in (_header(scope, b"accept") or "")


def _to_login(scope: MutableMapping[str, Any], path: str) -> RedirectResponse:
    query = scope.get("query_string", b"").decode("latin-1")
    back = path + (f"?{query}" if query else "")
    root = scope.get("root_path", "")
    return RedirectResponse(f"{root}{LOGIN_PATH}?next={quote(back, safe='')}", status_code=303)


def _route_path(scope: MutableMapping[str, Any]) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path
