"""The ``threadline`` command line: nouns and verbs, ``--json`` on everything that lists.

Data lives under ``THREADLINE_HOME`` (or ``--home``). Errors print one line saying what was
wrong and a hint saying what to do, and exit with the status in :mod:`threadline.errors`.
"""

from __future__ import annotations

from pathlib import Path

import click

from threadline.cli._common import Context
from threadline.cli.cache import cache
from threadline.cli.calls import calls
from threadline.cli.chat import chat
from threadline.cli.compaction import compact, constraints, context, state
from threadline.cli.conversations import conversations
from threadline.cli.corpus import ask, corpus
from threadline.cli.cost import cost
from threadline.cli.db import db
from threadline.cli.evaluate import eval_
from threadline.cli.importer import import_
from threadline.cli.memory import forget, memory
from threadline.cli.rewrite import rewrite
from threadline.cli.serve import serve
from threadline.errors import ThreadlineError
from threadline.settings import Settings
from threadline.version import __version__


class _Group(click.Group):
    """Turns a ThreadlineError anywhere below into its message and exit status."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ThreadlineError as err:
            click.echo(f"error: {err}", err=True)
            ctx.exit(err.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False, path_type=Path),
              help="Data directory. Default: $THREADLINE_HOME, else the user data directory.")
@click.option("--database-url", metavar="URL",
              help="PostgreSQL connection string (postgresql://user@host/db). "
                   "Default: $THREADLINE_DATABASE_URL, else SQLite under the data directory.")
@click.version_option(__version__, prog_name="threadline")
@click.pass_context
def cli(ctx: click.Context, home: Path | None, database_url: str | None) -> None:
    """Durable, prompt-cache-aware multi-turn conversations."""
    settings = Settings.from_env()
    if home is not None:
        settings = settings.with_(home=home)
    if database_url is not None:
        settings = settings.with_(database_url=database_url)
    ctx.obj = Context(settings)


cli.add_command(chat)
cli.add_command(conversations)
cli.add_command(cost)
cli.add_command(cache)
cli.add_command(calls)
cli.add_command(import_)
cli.add_command(context)
cli.add_command(compact)
cli.add_command(constraints)
cli.add_command(state)
cli.add_command(serve)
cli.add_command(db)
cli.add_command(rewrite)
cli.add_command(eval_)
cli.add_command(corpus)
cli.add_command(ask)
cli.add_command(memory)
cli.add_command(forget)


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    cli.main(args=argv, prog_name="threadline")


if __name__ == "__main__":
    main()
