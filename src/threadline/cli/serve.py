"""``threadline serve``: the HTTP service over this data directory."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from threadline.cli._common import Context, model_option, pass_context
from threadline.errors import InputError
from threadline.metrics import INSTALL_HINT, available

if TYPE_CHECKING:
    from threadline.metrics.registry import Metrics


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--metrics/--no-metrics", "metrics_on", default=None,
              help="Prometheus metrics at GET /metrics. Default: $THREADLINE_METRICS, else on "
                   "when prometheus-client (the metrics extra) is installed.")
@model_option()
@pass_context
def serve(ctx: Context, host: str, port: int, metrics_on: bool | None,
          model_name: str | None) -> None:
    """Serve conversations over HTTP (OpenAPI spec at /openapi.json, docs at /docs)."""
    try:
        import uvicorn

        from threadline.server.app import create_app
    except ImportError as err:
        raise InputError(f"the HTTP service needs the server extra ({err.name} is missing)",
                         hint="pip install 'threadline[server]'") from err
    metrics = service_metrics(ctx, metrics_on)
    model = ctx.model(model_name)  # a missing model fails before listening
    engine = ctx.engine(model) if metrics is None else ctx.engine(
        model, hooks=[metrics.hook], observer=metrics)
    click.echo(f"threadline serving {ctx.store().path} on http://{host}:{port}"
               f"{'' if metrics is None else ' (metrics at /metrics)'}", err=True)
    uvicorn.run(create_app(engine, metrics), host=host, port=port, log_level="warning")


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
