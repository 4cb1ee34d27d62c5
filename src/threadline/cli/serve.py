"""``threadline serve``: the HTTP service over this data directory, with the inspector's pages
at ``/ui`` (``--no-ui``: the API alone); ``threadline ui``: the same on loopback, opened in a
browser.

On a loopback host the service is open until a token exists (``threadline tokens create``);
on any other host, or with ``--require-tokens``, every request needs one from the start, and
serve refuses to start while there is none. See docs/security.md and docs/inspector.md.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import threading
import time
import webbrowser
from typing import TYPE_CHECKING, Any

import click

from threadline.cli._common import Context, model_option, pass_context
from threadline.errors import InputError
from threadline.metrics import INSTALL_HINT, available
from threadline.models import ModelBackend
from threadline.settings import Settings

if TYPE_CHECKING:
    from threadline.metrics.registry import Metrics
    from threadline.tracing.setup import Tracing


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Where to listen. Any host but a loopback one needs tokens.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--require-tokens", is_flag=True,
              help="Refuse requests without a valid bearer token on a loopback host too "
                   "(always so on other hosts).")
@click.option("--metrics/--no-metrics", "metrics_on", default=None,
              help="Prometheus metrics at GET /metrics. Default: $THREADLINE_METRICS, else on "
                   "when prometheus-client (the metrics extra) is installed.")
@click.option("--ui/--no-ui", "ui_on", default=True, show_default=True,
              help="Serve the inspector's pages at /ui (docs/inspector.md).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Processes that share the port, each with its own engine and model. One "
                   "turn at a time per conversation holds across them (the lease is in the "
                   "store). More than one: metrics are off (each would count only its own "
                   "process).")
@model_option()
@pass_context
def serve(ctx: Context, host: str, port: int, require_tokens: bool, metrics_on: bool | None,
          ui_on: bool, workers: int, model_name: str | None) -> None:
    """Serve conversations over HTTP (OpenAPI spec at /openapi.json, docs at /docs, the
    inspector at /ui)."""
    if workers > 1:
        _serve_workers(ctx, host, port, workers, require_tokens, metrics_on, ui_on, model_name)
        return
    app, notes = _service(ctx, host, require_tokens, metrics_on, ui_on, model_name)
    click.echo(f"threadline serving {ctx.store().path} on http://{host}:{port}{notes}",
               err=True)
    _uvicorn().run(app, host=host, port=port, log_level="warning")


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=0,
              help="Where to listen on 127.0.0.1. Default: a free port.")
@click.option("--browser/--no-browser", "open_browser", default=True, show_default=True,
              help="Open the page in this machine's browser, where one exists.")
@model_option()
@pass_context
def ui(ctx: Context, port: int, open_browser: bool, model_name: str | None) -> None:
    """Open the inspector: serve on loopback and show /ui in a browser.

    The URL is printed either way; without a browser (a server, a container) open it from
    wherever can reach this machine's loopback. Open until a token exists, as serve is on
    127.0.0.1; then the page asks for one."""
    app, notes = _service(ctx, "127.0.0.1", False, None, True, model_name)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(("127.0.0.1", port))
    except OSError as err:
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {err.strerror}",
                         hint="choose another --port, or leave it out for a free one") from err
    listening.listen(128)
    url = f"http://127.0.0.1:{listening.getsockname()[1]}/ui"
    click.echo(f"threadline inspector for {ctx.store().path} at {url}{notes}", err=True)
    click.echo(url)
    if open_browser:
        threading.Thread(target=_open_when_up, args=(url,), daemon=True).start()
    try:
        _uvicorn().run(app, fd=listening.fileno(), log_level="warning")
    finally:
        listening.close()


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as err:
        raise InputError(f"the HTTP service needs the server extra ({err.name} is missing)",
                         hint="pip install 'threadline[server]'") from err
    return uvicorn


def _service(ctx: Context, host: str, require_tokens: bool, metrics_on: bool | None,
             ui_on: bool, model_name: str | None) -> tuple[Any, str]:
    """The app ``serve`` and ``ui`` listen with, and what to say about it; everything that
    can be refused is refused here, before anything listens."""
    required, metrics, tracing, model = _checked(ctx, host, require_tokens, metrics_on,
                                                 model_name)
    from threadline.inspector.app import mount
    from threadline.server.app import create_app

    engine = ctx.engine(model) if metrics is None else ctx.engine(
        model, hooks=[metrics.hook], observer=metrics)
    if metrics is not None and tracing is not None and tracing.recorder is not None:
        metrics.watch_traces(tracing)
    app = create_app(engine, metrics, require_tokens=required, tracing=tracing)
    if ui_on:
        mount(app, engine)
    return app, _notes(required, metrics is not None, tracing is not None, ui_on)


def _notes(required: bool, metrics: bool, traced: bool, ui_on: bool) -> str:
    """What the start-up line says about how the service runs."""
    return ((" (bearer tokens required)" if required else "")
            + (" (metrics at /metrics)" if metrics else "")
            + (" (traces on)" if traced else "")
            + (" (inspector at /ui)" if ui_on else ""))


def _checked(ctx: Context, host: str, require_tokens: bool, metrics_on: bool | None,
             model_name: str | None) -> tuple[bool, Metrics | None, Tracing | None,
                                              ModelBackend]:
    """Whether tokens are required, the metrics, the tracing and the model the service runs
    with; whatever cannot be served is refused here."""
    try:
        import threadline.inspector.app  # noqa: F401 - the server extra, checked up front
        import threadline.server.app  # noqa: F401
    except ImportError as err:
        raise InputError(f"the HTTP service needs the server extra ({err.name} is missing)",
                         hint="pip install 'threadline[server]'") from err
    _uvicorn()
    # once tokens are required, revoking the last one locks the service rather than opening it
    required = require_tokens or not is_loopback(host)
    if required:
        _require_a_token(ctx, host, require_tokens)
    metrics = service_metrics(ctx, metrics_on)
    tracing = ctx.tracing()  # a bad OTEL_* setting fails before listening
    model = ctx.model(model_name)  # a missing model fails before listening
    return required, metrics, tracing, model


# -- several processes on one port ------------------------------------------------------------

WORKER_SPEC = "THREADLINE_SERVE_WORKER"  # what each worker builds its service from


def _serve_workers(ctx: Context, host: str, port: int, workers: int, require_tokens: bool,
                   metrics_on: bool | None, ui_on: bool, model_name: str | None) -> None:
    """Check everything here, as a single process would, then let uvicorn start ``workers``
    processes on the port; each builds the same service from the environment
    (``worker_app``) and restarts if it dies."""
    if metrics_on or (metrics_on is None and ctx.settings.metrics):
        raise InputError(f"metrics with --workers {workers}: each process counts only its own "
                         "turns, so a scrape would see one worker's share",
                         hint="serve with --no-metrics (or unset THREADLINE_METRICS), or one "
                              "worker per port and scrape each")
    required, _, tracing, model = _checked(ctx, host, require_tokens, False, model_name)
    if callable(close := getattr(model, "close", None)):
        close()  # each worker loads its own
    path = ctx.store().path  # opened (and migrated) here: the workers never race to migrate
    os.environ.update({"THREADLINE_HOME": str(ctx.settings.home), WORKER_SPEC: json.dumps(
        {"host": host, "required": required, "ui": ui_on, "model": model_name,
         "parent": os.getpid()})})
    if ctx.settings.database_url is not None:
        os.environ["THREADLINE_DATABASE_URL"] = ctx.settings.database_url
    click.echo(f"threadline serving {path} on http://{host}:{port} with {workers} worker "
               f"processes{_notes(required, False, tracing is not None, ui_on)}", err=True)
    from threadline.server.workers import NO_DELAY_HTTP

    _uvicorn().run(f"{__name__}:worker_app", factory=True, workers=workers, host=host,
                   port=port, http=NO_DELAY_HTTP, log_level="warning")


def worker_app() -> Any:
    """One worker's service, built as ``_serve_workers`` described it (uvicorn calls this in
    each worker process)."""
    from threadline.server.workers import stop_when_orphaned

    spec = json.loads(os.environ[WORKER_SPEC])
    app, _ = _service(Context(Settings.from_env()), spec["host"], spec["required"], False,
                      spec["ui"], spec["model"])
    threading.Thread(target=stop_when_orphaned, args=(spec["parent"],), daemon=True,
                     name="threadline-parent-watch").start()
    return app


def _open_when_up(url: str, wait_s: float = 10.0) -> None:
    """Open ``url`` in a graphical browser once the server answers; a console browser
    (lynx, w3m: it would take over the terminal) or none at all is left alone."""
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return
    if type(browser) is webbrowser.GenericBrowser:
        return
    host, _, port = url.split("/")[2].partition(":")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    with contextlib.suppress(webbrowser.Error):
        browser.open(url)


def service_metrics(ctx: Context, asked: bool | None) -> Metrics | None:
    """The service's metrics: as asked (the flag, else the setting), else on when the extra
    is installed; asked for without it, refused before anything listens."""
    wanted = asked if asked is not None else ctx.settings.metrics
    if wanted is False or (wanted is None and not available()):
        return None
    if not available():
        raise InputError("metrics need the metrics extra (prometheus-client is missing)",
                         hint=f"{INSTALL_HINT}, or serve with --no-metrics")
    from threadline.metrics.registry import Metrics

    metrics = Metrics()
    metrics.watch_memory(ctx.store())
    if ctx.settings.monitor:
        metrics.watch_monitor(ctx.store())
    return metrics


def is_loopback(host: str) -> bool:
    """Only this machine can connect: 127.0.0.0/8, ::1 or localhost."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to anything


def _require_a_token(ctx: Context, host: str, asked: bool) -> None:
    tokens = ctx.store().tokens
    if tokens is not None and tokens.any_active():
        return
    why = ("--require-tokens was given" if asked else
           f"{host} is not a loopback host, so anyone who can reach it could read and change "
           "every conversation")
    raise InputError(f"refusing to serve without access tokens: {why}, and no token exists "
                     "(or every one is revoked)",
                     hint="create one with: threadline tokens create --admin (or --user ID), "
                          "and send it as 'Authorization: Bearer SECRET'; or serve on "
                          "127.0.0.1")
