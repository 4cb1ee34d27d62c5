"""``mount``: the inspector added to the service's FastAPI app, at ``/ui``.

``threadline serve`` builds the API (``server.app.create_app``) and mounts the inspector on it,
so both read one store through one token guard. The API does not import the inspector: it
sits a layer above the server (tests/test_layers.py).

Mounted: the static files at ``/ui/static`` (route name ``inspector-static``), the views'
routers (``routes.py``, ``views.py`` and ``review_view.py``), and an error page: a refusal or a
bad parameter on an inspector page is shown as HTML with the status the API would answer,
while every other path keeps the API's JSON error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import cast

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from threadline.engine import Engine
from threadline.errors import ThreadlineError
from threadline.inspector import review_view, routes, views
from threadline.inspector.deps import Inspector, Pricing
from threadline.inspector.templating import render
from threadline.server.access import BROWSER_PREFIX

Handler = Callable[[Request, Exception], Response | Awaitable[Response]]


def mount(app: FastAPI, engine: Engine, *, pricing: Pricing | None = None) -> None:
    """Serve the inspector at ``/ui`` of ``app`` (made by ``create_app`` over ``engine``)."""
    app.state.inspector = Inspector(engine, pricing or Pricing())
    app.mount(f"{BROWSER_PREFIX}/static",
              StaticFiles(packages=[("threadline.inspector", "static")]),
              name="inspector-static")
    app.include_router(routes.router)  # conversations, a conversation, login
    app.include_router(views.router)   # a call, a user's memory, the charts
    app.include_router(review_view.router)  # the review queue
    api_errors = cast(Handler | None, app.exception_handlers.get(ThreadlineError))

    async def error(request: Request, err: Exception) -> Response:
        if api_errors is None:
            raise err
        answer = api_errors(request, err)
        response = await answer if isinstance(answer, Awaitable) else answer
        path = request.url.path
        if not (path == BROWSER_PREFIX or path.startswith(BROWSER_PREFIX + "/")) \
                or "text/html" not in request.headers.get("accept", ""):
            return response
        assert isinstance(err, ThreadlineError)
        page = render(request, "error.html", status_code=response.status_code, error=err)
        for name in ("www-authenticate", "retry-after"):
            if name in response.headers:
                page.headers[name] = response.headers[name]
        return page

    app.add_exception_handler(ThreadlineError, error)
