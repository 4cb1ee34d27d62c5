"""The inspector's call, memory and stats pages (``router``, included under ``/ui``).

    GET  /ui/calls/{call_id}                      one call: the request by segment, the reused
                                                  bytes shaded, the first divergence, a diff
                                                  against the previous call, the raw bytes
    GET  /ui/calls/{call_id}/diff                 its diff against the previous call alone
    GET  /ui/calls/{call_id}/raw                  the exact bytes sent, and nothing else
    GET  /ui/memory/{user_id}                     the user's memory, with provenance and history
    GET  /ui/memory/{user_id}/{entry_id}/edit     a correction's form; POST: correct it
    GET  /ui/memory/{user_id}/{entry_id}/delete   the confirmation; POST: delete it for real
    GET  /ui/memory/{user_id}/forget              the confirmation; POST: forget the user
    GET  /ui/c/{conversation_id}/charts           reuse and cost per turn of one branch
    GET  /ui/stats                                the per-turn-index curves across conversations

Every route takes the caller and checks what the path names as the API does
(``server/access.py``): a user token reaches only its own user's calls and memory, 403 for
another user's, 404 for what does not exist. Every POST must come from the inspector's own
pages (``csrf.same_origin``) and must carry its confirmation; each change goes through the
same ``MemoryStore`` method as the CLI's (``memory edit``, ``memory delete``, ``memory delete
--all``), so it keeps the same guarantees: a deletion is real, and a forgotten user leaves
nothing in any table.

The pages need the engine they were mounted with (``current_engine``).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from threadline.cache.pricing import profile
from threadline.engine import Engine
from threadline.errors import InputError, UnknownBranch
from threadline.inspector.call_view import call_diff, call_page
from threadline.inspector.charts import (
    DEFAULT_INPUT_PRICE,
    DEFAULT_PROFILE,
    conversation_chart,
    conversation_samples,
    stats_charts,
)
from threadline.inspector.csrf import same_origin
from threadline.inspector.deps import InspectorDep
from threadline.inspector.memory_view import chains
from threadline.inspector.templating import render
from threadline.items import utc_now
from threadline.memory import MemoryStore
from threadline.server import access
from threadline.server.access import Caller, CallerDep
from threadline.stats import GROUPINGS, METRICS, curves, since_of, turn_samples
from threadline.stores import MAIN

router = APIRouter()

MAX_FORM_BYTES = 64 * 1024
_DONE = {"edited": "The entry was corrected; the old text is kept below as its history.",
         "deleted": "The entry was deleted, with the versions it replaced.",
         "forgot": "Everything remembered about this user was deleted."}


def current_engine(inspector: InspectorDep) -> Engine:
    """The engine the inspector was mounted with (``mount``)."""
    return inspector.engine


EngineDep = Annotated[Engine, Depends(current_engine)]


async def form_fields(request: Request) -> dict[str, str]:
    """An HTML form's fields (``application/x-www-form-urlencoded``, as the pages send)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise InputError(f"this form must be sent as application/x-www-form-urlencoded, not "
                         f"{kind or 'without a content type'}; nothing was changed",
                         hint="use the form on the inspector's page")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise InputError(f"the form is {len(body):,} bytes, over {MAX_FORM_BYTES:,}; "
                         "nothing was changed")
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as err:
        raise InputError(f"the form could not be read ({err}); nothing was changed",
                         hint="use the form on the inspector's page") from None
    return {name: values[-1] for name, values in parsed.items()}


FormDep = Annotated[dict[str, str], Depends(form_fields)]
CHANGES = [Depends(same_origin)]  # before the form is read, before anything is written


def confirmed(form: dict[str, str], expected: str, what: str) -> None:
    if form.get("confirm") != expected:
        raise InputError(f"{what} needs its confirmation; nothing was changed",
                         hint="tick the confirmation on the inspector's page, then send it")


# -- a call -----------------------------------------------------------------------------------

@router.get("/ui/calls/{call_id}", name="inspector-call", response_class=HTMLResponse)
def call_view(request: Request, call_id: str, caller: CallerDep, engine: EngineDep,
              history_page: int | None = Query(default=None, ge=1)) -> HTMLResponse:
    """One model call, exactly as it was sent."""
    call = access.call(caller, engine.store, call_id)
    page = call_page(engine.store, call, history_page=history_page)
    return render(request, "call.html", page=page)


@router.get("/ui/calls/{call_id}/diff", name="inspector-call-diff",
            response_class=HTMLResponse)
def call_diff_view(request: Request, call_id: str, caller: CallerDep,
                   engine: EngineDep) -> HTMLResponse:
    """The call's diff against the previous call, on its own (for large requests)."""
    call = access.call(caller, engine.store, call_id)
    return render(request, "call_diff.html", page=call_diff(engine.store, call))


@router.get("/ui/calls/{call_id}/raw", name="inspector-call-raw")
def call_raw(call_id: str, caller: CallerDep, engine: EngineDep) -> Response:
    """The exact bytes the model consumed, as ``threadline calls show ID --request`` prints
    them."""
    call = access.call(caller, engine.store, call_id)
    assert call.request is not None
    kind = "text/plain" if call.request.rendering is not None else "application/json"
    return Response(call.request.exact_bytes(), media_type=f"{kind}; charset=utf-8")


# -- a user's memory --------------------------------------------------------------------------

def _memory(caller: Caller, engine: Engine, user_id: str) -> MemoryStore:
    caller.acting_for(user_id, "user")
    return MemoryStore(engine.store, clock=engine.clock)


@router.get("/ui/memory/{user_id}", name="inspector-memory", response_class=HTMLResponse)
def memory_view(request: Request, user_id: str, caller: CallerDep, engine: EngineDep,
                done: str | None = None) -> HTMLResponse:
    """What is remembered about the user: current entries, their revisions, the rest."""
    memory = _memory(caller, engine, user_id)
    found = chains(memory.entries(user_id, history=True), engine.clock())
    return render(request, "memory.html", user_id=user_id, chains=found,
                  done=_DONE.get(done or ""))


@router.get("/ui/memory/{user_id}/{entry_id}/edit", name="inspector-memory-edit",
            response_class=HTMLResponse)
def memory_edit_form(request: Request, user_id: str, entry_id: str, caller: CallerDep,
                     engine: EngineDep) -> HTMLResponse:
    entry = _memory(caller, engine, user_id).get(user_id, entry_id)
    return render(request, "memory_confirm.html", action="edit", user_id=user_id, entry=entry)


@router.post("/ui/memory/{user_id}/{entry_id}/edit", name="inspector-memory-edit-post",
             dependencies=CHANGES)
def memory_edit(request: Request, user_id: str, entry_id: str, caller: CallerDep,
                engine: EngineDep, form: FormDep) -> RedirectResponse:
    """Correct an entry, as ``threadline memory edit`` does."""
    memory = _memory(caller, engine, user_id)
    confirmed(form, "yes", "a correction")
    memory.correct(user_id, entry_id, form.get("text", ""))
    return _back(request, user_id, "edited")


@router.get("/ui/memory/{user_id}/{entry_id}/delete", name="inspector-memory-delete",
            response_class=HTMLResponse)
def memory_delete_form(request: Request, user_id: str, entry_id: str, caller: CallerDep,
                       engine: EngineDep) -> HTMLResponse:
    entry = _memory(caller, engine, user_id).get(user_id, entry_id)
    return render(request, "memory_confirm.html", action="delete", user_id=user_id,
                  entry=entry)


@router.post("/ui/memory/{user_id}/{entry_id}/delete", name="inspector-memory-delete-post",
             dependencies=CHANGES)
def memory_delete(request: Request, user_id: str, entry_id: str, caller: CallerDep,
                  engine: EngineDep, form: FormDep) -> RedirectResponse:
    """Delete an entry for real, with the entries it replaced (``threadline memory
    delete``)."""
    memory = _memory(caller, engine, user_id)
    confirmed(form, "yes", "a deletion")
    memory.delete(user_id, entry_id)
    return _back(request, user_id, "deleted")


@router.get("/ui/memory/{user_id}/forget", name="inspector-memory-forget",
            response_class=HTMLResponse)
def memory_forget_form(request: Request, user_id: str, caller: CallerDep,
                       engine: EngineDep) -> HTMLResponse:
    count = len(_memory(caller, engine, user_id).entries(user_id, history=True))
    return render(request, "memory_confirm.html", action="forget", user_id=user_id,
                  entry=None, count=count)


@router.post("/ui/memory/{user_id}/forget", name="inspector-memory-forget-post",
             dependencies=CHANGES)
def memory_forget(request: Request, user_id: str, caller: CallerDep, engine: EngineDep,
                  form: FormDep) -> RedirectResponse:
    """Delete everything remembered about the user (``threadline memory delete --all``): the
    confirmation is the user id, typed."""
    memory = _memory(caller, engine, user_id)
    confirmed(form, user_id, "forgetting a user")
    memory.forget(user_id)
    return _back(request, user_id, "forgot")


def _back(request: Request, user_id: str, done: str) -> RedirectResponse:
    url = request.url_for("inspector-memory", user_id=user_id).include_query_params(done=done)
    return RedirectResponse(str(url), status_code=303)


# -- charts -------------------------------------------------------------------------------------

@router.get("/ui/c/{conversation_id}/charts", name="inspector-conversation-charts",
            response_class=HTMLResponse)
def conversation_charts(request: Request, conversation_id: str, caller: CallerDep,
                        inspector: InspectorDep, branch: str = MAIN) -> HTMLResponse:
    """Reuse and cost per turn of one branch, as SVG: a page of its own, since it reads the
    branch's every call where the conversation page reads one page of turns."""
    found = access.conversation(caller, inspector.store, conversation_id)
    if branch not in {b.name for b in inspector.store.branches(conversation_id)}:
        raise UnknownBranch(conversation_id, branch)
    pricing = inspector.pricing
    samples = conversation_samples(inspector.store, conversation_id, branch,
                                   pricing=pricing.profile, input_price=pricing.input_price)
    return render(request, "conversation_charts.html", conversation=found, branch=branch,
                  chart=conversation_chart(samples), turns=len(samples),
                  profile=pricing.profile.name, input_price=pricing.input_price)



@router.get("/ui/stats", name="inspector-stats", response_class=HTMLResponse)
def stats_view(request: Request, caller: CallerDep, engine: EngineDep,
               group: str = "auto", profile_name: str = Query(DEFAULT_PROFILE, alias="profile"),
               input_price: float = Query(DEFAULT_INPUT_PRICE, ge=0),
               since: str | None = None) -> HTMLResponse:
    """``threadline stats`` as charts, over the conversations the caller may see."""
    pricing = profile(profile_name)
    start = None if not since else since_of(since, utc_now())
    store = engine.store
    samples = []
    # a user's own conversations only; an admin's (None) every one
    owned = None if caller.admin else [s.conversation.id
                                       for s in store.conversations(owner=caller.user_id)]
    if owned is None or owned:
        samples = turn_samples(store, profile=pricing, input_price=input_price,
                               conversations=owned, since=start)
    points = curves(samples, group)
    return render(request, "stats.html", points=points, charts=stats_charts(points),
                  metrics=METRICS, groupings=GROUPINGS, group=group, profile=pricing.name,
                  input_price=input_price, since=since or "",
                  conversations=len({s.conversation_id for s in samples}),
                  turns=len(samples))
