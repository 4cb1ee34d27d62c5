"""``threadline serve``: the HTTP service over this data directory."""

from __future__ import annotations

import click

from threadline.cli._common import Context, model_option, pass_context
from threadline.errors import InputError


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@model_option()
@pass_context
def serve(ctx: Context, host: str, port: int, model_name: str | None) -> None:
    """Serve conversations over HTTP (OpenAPI spec at /openapi.json, docs at /docs)."""
    try:
        import uvicorn

        from threadline.server.app import create_app
    except ImportError as err:
        raise InputError(f"the HTTP service needs the server extra ({err.name} is missing)",
                         hint="pip install 'threadline[server]'") from err
    engine = ctx.engine(ctx.model(model_name))  # a missing model fails before listening
    click.echo(f"threadline serving {ctx.store().path} on http://{host}:{port}", err=True)
    uvicorn.run(create_app(engine), host=host, port=port, log_level="warning")
