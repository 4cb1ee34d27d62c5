"""The ``threadline`` command line: nouns and verbs, ``--json`` on everything that lists.

Each noun owns its verbs (``threadline corpus delete``, ``threadline memory list``); removal is
always ``delete`` (``revoke`` for a token, which is kept as revoked), and a destructive command
asks first, or needs ``--yes`` when standard input is not a terminal. The few top-level verbs
are entry points: ``chat``, ``serve``, ``import``, ``rewrite``. The previous release's
spellings still work, hidden (``cli/deprecated.py``).

Data lives under ``THREADLINE_HOME`` (or ``--home``). Errors print one line saying what was
wrong and a hint saying what to do, and exit with the status in :mod:`threadline.errors`.
"""

from __future__ import annotations

from pathlib import Path

import click

from threadline.cli._common import Context
from threadline.cli.audit import audit
from threadline.cli.cache import cache
from threadline.cli.calls import calls
from threadline.cli.chat import chat
from threadline.cli.compaction import constraints, state
from threadline.cli.conversations import conversations
from threadline.cli.corpus import corpus
from threadline.cli.cost import cost
from threadline.cli.db import db
from threadline.cli.deprecated import register as register_deprecated
from threadline.cli.evaluate import eval_
from threadline.cli.importer import import_
from threadline.cli.memory import memory
from threadline.cli.replay import replay_
from threadline.cli.review import review
from threadline.cli.rewrite import rewrite
from threadline.cli.serve import serve, ui
from threadline.cli.stats import stats
from threadline.cli.tokens import tokens
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


for command in (chat, conversations, calls, constraints, state, corpus, memory, cost, cache,
                replay_, stats, rewrite, import_, serve, ui, tokens, db, eval_, audit,
                review):
    cli.add_command(command)
register_deprecated(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    cli.main(args=argv, prog_name="threadline")


if __name__ == "__main__":
    main()
