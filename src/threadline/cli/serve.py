"""``threadline serve``: the HTTP service over this data directory.

On a loopback host the service is open until a token exists (``threadline tokens create``);
on any other host, or with ``--require-tokens``, every request needs one from the start, and
serve refuses to start while there is none. See docs/security.md.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import click

from threadline.cli._common import Context, model_option, pass_context
from threadline.errors import InputError
from threadline.metrics import INSTALL_HINT, available

if TYPE_CHECKING:
    from threadline.metrics.registry import Metrics


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
@model_option()
@pass_context
def serve(ctx: Context, host: str, port: int, require_tokens: bool, metrics_on: bool | None,
          model_name: str | None) -> None:
    """Serve conversations over HTTP (OpenAPI spec at /openapi.json, docs at /docs)."""
    try:
        import uvicorn

        from threadline.server.app import create_app
    except ImportError as err:
        raise InputError(f"the HTTP service needs the server extra ({err.name} is missing)",
                         hint="pip install 'threadline[server]'") from err
    # once tokens are required, revoking the last one locks the service rather than opening it
    required = require_tokens or not is_loopback(host)
    if required:
        _require_a_token(ctx, host, require_tokens)
    metrics = service_metrics(ctx, metrics_on)
    tracing = ctx.tracing()  # a bad OTEL_* setting fails before listening
    model = ctx.model(model_name)  # a missing model fails before listening
    engine = ctx.engine(model) if metrics is None else ctx.engine(
        model, hooks=[metrics.hook], observer=metrics)
    click.echo(f"threadline serving {ctx.store().path} on http://{host}:{port}"
               + (" (bearer tokens required)" if required else "")
               + ("" if metrics is None else " (metrics at /metrics)")
               + ("" if tracing is None else " (traces on)"), err=True)
    uvicorn.run(create_app(engine, metrics, require_tokens=required, tracing=tracing),
                host=host, port=port, log_level="warning")


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
