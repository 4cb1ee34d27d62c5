"""The inspector's first two views, its login, and the event stream its pages listen to.

    GET  /ui                          the conversations (view 1)
    GET  /ui/c/{id}                   a conversation (view 2): ?branch= &before= | &after= &turns=
    GET  /ui/generations/{id}/events  a running reply's events, as /v1/generations/{id}/events
    GET  /ui/login, POST /ui/login    paste a token; it becomes the page's cookie
    POST /ui/logout                   forget it

Every route checks the caller as the API does (``server/access.py``) before it reads
anything; every POST passes ``csrf.same_origin`` first.
"""

from __future__ import annotations

import time
from typing import Annotated
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from threadline.errors import InputError, NotFound
from threadline.inspector import branches, listing, timeline
from threadline.inspector.csrf import same_origin
from threadline.inspector.deps import InspectorDep
from threadline.inspector.standing import StandingFold
from threadline.inspector.templating import render
from threadline.server import access
from threadline.server.access import LOGIN_PATH, SESSION_COOKIE, CallerDep
from threadline.server.streams import resume_position, resumed_events
from threadline.stores.base import MAIN
from threadline.stores.browse import lineage as lineage_of
from threadline.stores.tokens import secret_hash
from threadline.turn.children import delegations
from threadline.turn.delegate import parent_of

router = APIRouter(prefix="/ui", include_in_schema=False)
standing = StandingFold()
SameOrigin = Depends(same_origin)
_MAX_FORM = 4096  # bytes: a token and where to go next


@router.get("", response_class=HTMLResponse, name="inspector-conversations")
def conversations(request: Request, caller: CallerDep, inspector: InspectorDep,
                  q: str | None = None, title: str | None = None, user: str | None = None,
                  sort: str | None = None, limit: str | None = None,
                  offset: str | None = None) -> HTMLResponse:
    found = listing.listing(inspector, caller, q=q, title=title, user=user, sort=sort,
                            limit=limit, offset=offset)
    return render(request, "conversations.html", listing=found, pricing=inspector.pricing)


@router.get("/c/{conversation_id}", response_class=HTMLResponse,
            name="inspector-conversation")
def conversation(request: Request, conversation_id: str, caller: CallerDep,
                 inspector: InspectorDep, branch: str = MAIN, before: str | None = None,
                 after: str | None = None, turns: str | None = None) -> HTMLResponse:
    found = access.conversation(caller, inspector.store, conversation_id)
    every = inspector.store.branches(conversation_id)
    line = lineage_of(every, branch)
    if not line:
        raise UnknownBranchPage(conversation_id, branch)
    if before is not None and after is not None:
        raise InputError("a page is either before= or after= an item, not both",
                         hint="follow the page links")
    size = listing.number(turns, "turns", default=timeline.DEFAULT_TURNS, low=1,
                          high=timeline.MAX_TURNS)
    cursor = {k: listing.number(v, k, default=0, low=0, high=2**62)
              for k, v in (("before", before), ("after", after)) if v is not None}
    shown = timeline.page(inspector, conversation_id, line, size=size, **cursor)
    running = None
    if inspector.store.lease_holder(conversation_id, time.time()) is not None:
        running = inspector.browse.running_generation(conversation_id)
    return render(request, "conversation.html", conversation=found, branch=branch,
                  tree=branches.tree(inspector, conversation_id), page=shown,
                  standing=standing.of(inspector, conversation_id, line), running=running,
                  turns=None if turns is None else size, shown=timeline.shown,
                  describe=timeline.describe, parent=parent_of(found),
                  children=delegations(inspector.store, conversation_id))


@router.get("/generations/{generation_id}/events", name="inspector-events")
def events(generation_id: str, caller: CallerDep, inspector: InspectorDep,
           offset: Annotated[int | None, Query(ge=0)] = None,
           last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None
           ) -> StreamingResponse:
    """The rest of a running reply, from ``offset`` or ``Last-Event-ID``: the API's resumable
    stream (server/streams.py), on a path the page's cookie reaches."""
    store = inspector.store
    generation = store.generation(generation_id)
    if generation is None:
        raise NotFound(f"no generation {generation_id}",
                       hint="open the conversation again: the reply may have finished")
    access.generation(caller, store, generation)
    start = resume_position(generation_id, last_event_id, offset)
    return StreamingResponse(resumed_events(store, generation, start),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


# -- signing in -------------------------------------------------------------------------------

@router.get("/login", response_class=HTMLResponse, name="inspector-login")
def login_page(request: Request, next: str | None = None) -> HTMLResponse:  # noqa: A002
    return render(request, "login.html", next=_local(next), error=None)


@router.post("/login", response_class=HTMLResponse, dependencies=[SameOrigin])
async def login(request: Request, inspector: InspectorDep) -> Response:
    """The pasted token, checked against the store; set as the page's cookie if it is live."""
    if len(await request.body()) > _MAX_FORM:
        raise InputError("the sign-in form is too large", hint="paste only the token")
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    secret = (form.get("token") or [""])[0].strip()
    next = (form.get("next") or [""])[0]  # noqa: A001
    tokens = inspector.store.tokens
    found = None if not secret or tokens is None else \
        await run_in_threadpool(tokens.find, secret_hash(secret))
    if found is None or not found.active:
        why = ("paste a token" if not secret else "that token is not one this service issued"
               if found is None else f"token {found.id} was revoked")
        return render(request, "login.html", status_code=401, next=_local(next),
                      error=f"Not signed in: {why}. An operator creates one with: "
                            "threadline tokens create --user ID")
    response = RedirectResponse(_local(next), status_code=303)
    response.set_cookie(SESSION_COOKIE, secret, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/ui")
    return response


@router.post("/logout", dependencies=[SameOrigin], name="inspector-logout")
def logout(request: Request) -> RedirectResponse:
    response = RedirectResponse(LOGIN_PATH, status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/ui", httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
    return response


def _local(target: str | None) -> str:
    """Where to go after signing in: a path of the inspector, never another site."""
    if not target:
        return "/ui"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not (target == "/ui" or target.startswith("/ui/")) \
            or target.startswith(LOGIN_PATH):
        return "/ui"
    return target


class UnknownBranchPage(NotFound):
    def __init__(self, conversation_id: str, branch: str) -> None:
        super().__init__(f"conversation {conversation_id} has no branch {branch!r}",
                         hint="choose one from the branch tree")


__all__ = ["router"]
