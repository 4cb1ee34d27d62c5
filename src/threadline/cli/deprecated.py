"""The previous release's spellings, kept for one release as hidden commands: each prints one
deprecation line on stderr, then runs the command that replaced it. Delete this module (and
its registration in ``cli/__init__.py``) in the next release."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from threadline.cli.compaction import compact, constraints, context
from threadline.cli.compaction import delete as constraints_delete
from threadline.cli.corpus import ask, corpus
from threadline.cli.corpus import delete as corpus_delete
from threadline.cli.memory import delete as memory_delete
from threadline.cli.memory import memory


def warn(old: str, new: str) -> None:
    """The line an old spelling prints on stderr before it runs the new one."""
    click.echo(f'warning: "threadline {old}" is deprecated; use "threadline {new}"', err=True)


def renamed(command: click.Command, old: str, new: str, *,
            params: list[click.Parameter] | None = None,
            translate: Callable[..., dict[str, Any]] | None = None) -> click.Command:
    """A hidden command spelled ``old`` that warns, then runs ``command`` (spelled ``new``):
    with the same parameters, or with ``params`` whose values ``translate`` maps onto
    ``command``'s."""
    def run(**values: Any) -> Any:
        warn(old, new)
        given = translate(**values) if translate is not None else values
        return click.get_current_context().invoke(command, **given)

    return click.Command(old.split()[-1], callback=run,
                         params=list(command.params) if params is None else params,
                         help=f'Deprecated: use "threadline {new}".', hidden=True)


def _params(command: click.Command, *names: str) -> list[click.Parameter]:
    return [p for p in command.params if p.name in names]


def register(cli: click.Group) -> None:
    """Add every old spelling, hidden, where it used to be."""
    cli.add_command(renamed(context, "context", "conversations context"))
    cli.add_command(renamed(compact, "compact", "conversations compact"))
    cli.add_command(renamed(
        ask, "ask", "corpus ask NAME TEXT",
        params=[click.Argument(["text"]),
                click.Option(["--corpus", "corpus_name"], required=True, metavar="NAME"),
                *[p for p in ask.params if p.name not in ("name", "text")]],
        translate=lambda corpus_name, **rest: {"name": corpus_name, **rest}))
    cli.add_command(renamed(
        memory_delete, "forget", "memory delete --all --user U",
        params=_params(memory_delete, "user_id", "yes", "as_json"),
        translate=lambda **rest: {**rest, "everything": True}))
    memory.add_command(renamed(
        memory_delete, "memory purge", "memory delete --expired",
        params=_params(memory_delete, "yes", "as_json"),
        translate=lambda **rest: {**rest, "expired": True}))
    corpus.add_command(renamed(corpus_delete, "corpus remove", "corpus delete"))
    constraints.add_command(renamed(constraints_delete, "constraints remove",
                                    "constraints delete"))
