"""The CLI reference in docs/cli.md, generated from the commands' own help text."""

from __future__ import annotations

import click

_WIDTH = 100  # fixed, so the text does not depend on the terminal it is generated in


def _sections(command: click.Command, name: str, parent: click.Context) -> list[str]:
    with click.Context(command, info_name=name, parent=parent, terminal_width=_WIDTH,
                       max_content_width=_WIDTH) as ctx:
        out = [f"## `{ctx.command_path}`\n\n```\n{command.get_help(ctx)}\n```\n"]
        if isinstance(command, click.Group):
            for sub in sorted(command.commands):
                if not command.commands[sub].hidden:  # old spellings are not documented
                    out += _sections(command.commands[sub], sub, ctx)
    return out


def render() -> str:
    from threadline.cli import cli

    root = click.Context(cli, info_name="threadline", terminal_width=_WIDTH,
                         max_content_width=_WIDTH, **cli.context_settings)
    parts = ["# Command-line reference\n",
             "Generated from `--help` by `scripts/cli-docs`; a test keeps it in step.\n"]
    parts.append(f"## `threadline`\n\n```\n{cli.get_help(root)}\n```\n")
    for sub in sorted(cli.commands):
        if not cli.commands[sub].hidden:
            parts += _sections(cli.commands[sub], sub, root)
    return "\n".join(parts)
