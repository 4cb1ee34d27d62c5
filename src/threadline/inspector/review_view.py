"""The review queue's page (``router``, included under ``/ui``): the conversations the
trajectory monitor flagged, and a form that resolves one.

    GET  /ui/review                              the open flags, newest first (``?all=1``: the
                                                 resolved ones too, with their resolutions)
    POST /ui/review/{conversation_id}/resolve    resolve the conversation's open flag

The queue covers every user's conversations, so both are an admin's only (403 for a user's
token), as ``GET /v1/review`` is. Resolving goes through ``review.resolve``, as ``threadline
review resolve`` does: a note appended after the flag, nothing in the log changed. Like every
POST of the inspector it must come from its own pages (``csrf.same_origin``) and carry its
confirmation; a refusal writes nothing.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from threadline.errors import Forbidden
from threadline.inspector.deps import InspectorDep
from threadline.inspector.templating import render
from threadline.inspector.views import CHANGES, FormDep, confirmed
from threadline.server.access import Caller, CallerDep
from threadline.turn import review

router = APIRouter()


def _admin(caller: Caller) -> None:
    if not caller.admin:
        raise Forbidden("the review queue covers every user's conversations; this token is "
                        f"{caller.user_id!r}'s", hint="sign in with an admin token")


@router.get("/ui/review", name="inspector-review", response_class=HTMLResponse)
def review_page(request: Request, caller: CallerDep, inspector: InspectorDep,
                all: bool = False, done: str | None = None) -> HTMLResponse:  # noqa: A002
    """The flags, newest first: the open ones, or with ``all`` every one."""
    _admin(caller)
    flags = review.queue(inspector.store, resolved=all)
    return render(request, "review.html", flags=flags, all=all, note_limit=review.NOTE_LIMIT,
                  done=done == "resolved")


@router.post("/ui/review/{conversation_id}/resolve", name="inspector-review-resolve",
             dependencies=CHANGES)
def resolve(request: Request, conversation_id: str, caller: CallerDep,
            inspector: InspectorDep, form: FormDep) -> RedirectResponse:
    """Resolve the conversation's open flag, with the form's note."""
    _admin(caller)
    confirmed(form, "yes", "resolving a flag")
    review.resolve(inspector.store, conversation_id, form.get("note", ""),
                   by=f"inspector, token {caller.token_id}" if caller.token_id else "inspector")
    url = request.url_for("inspector-review").include_query_params(done="resolved")
    return RedirectResponse(str(url), status_code=303)
