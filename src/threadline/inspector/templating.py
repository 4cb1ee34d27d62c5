"""The inspector's templates: one Jinja2 environment over ``inspector/templates``, and
``render`` for every page.

Every page extends ``base.html`` (blocks ``title``, ``nav`` and ``content``). The templates are
read from the installed package (no build step, nothing fetched), autoescaped, and given a few
filters for the numbers every view shows: ``count`` (1,234), ``usd`` ($0.0123), ``ms``
(12.3 ms, or "–" for none), ``when`` (a UTC time, to the second) and ``pct`` (42%); and
``query(**params)``, a query string of the parameters that are set.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from threadline.items import format_time
from threadline.server.access import caller_in

_NONE = "–"


def _count(value: int | None) -> str:
    return _NONE if value is None else f"{value:,}"


def _usd(value: float | None) -> str:
    if value is None:
        return _NONE
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def _ms(value: float | None) -> str:
    return _NONE if value is None else f"{value:,.1f} ms"


def _when(value: datetime | None) -> str:
    return _NONE if value is None else format_time(value)[:19].replace("T", " ")


def _pct(value: float | None) -> str:
    return _NONE if value is None else f"{value:.0%}"


def _query(**params: Any) -> str:
    """A query string of the parameters that are set (None and "" left out)."""
    return urlencode({k: v for k, v in params.items() if v is not None and v != ""})


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("threadline.inspector", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined,  # a misspelt name fails the test, not the page
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(count=_count, usd=_usd, ms=_ms, when=_when, pct=_pct)
    env.globals.update(query=_query)
    return env


templates = Jinja2Templates(env=_environment())


def render(request: Request, name: str, *, status_code: int = 200,
           **context: Any) -> HTMLResponse:
    """The template ``name`` rendered for ``request`` (which ``url_for`` in the templates
    needs), with ``context``; every page also gets ``caller``, the signed-in token's user
    (None: an admin, or an open service)."""
    context.setdefault("caller", caller_in(request.scope))
    return templates.TemplateResponse(request, name, context, status_code=status_code)


__all__ = ["render", "templates"]
