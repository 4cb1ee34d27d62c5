"""``threadline import FILE --format openai-messages|sharegpt``: the layouts it reads are in
``interop/layout.py`` and docs/import.md."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from threadline.cli._common import Context, json_option, output, pass_context
from threadline.interop.importers import FORMATS, ImportReport, import_transcripts


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, readable=True,
                                        allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True,
              help="The transcript format of FILE.")
@json_option("Print a JSON report.")
@pass_context
def import_(ctx: Context, file: str, fmt: str, as_json: bool) -> None:
    """Create conversations from another system's transcripts (FILE, or - for stdin).

    FILE is one JSON document or JSON Lines. For openai-messages, a line holds a conversation
    (an array of messages, or an object with "messages") or one message; one-message lines in
    a row are one conversation, split where their "conversation_id" changes. Each conversation
    is imported whole or not at all; malformed ones are reported by line and skipped, and the
    exit status is 2 if any were. Empty messages are kept (with no text; an empty user message
    is never sent to a model). Importing a file again skips what is already there. See
    docs/import.md.
    """
    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    store = ctx.store()
    show_progress = not as_json and sys.stderr.isatty() and data.count(b"\n") > 100
    bar = click.progressbar(length=data.count(b"\n") + 1, label="importing", file=sys.stderr) \
        if show_progress else contextlib.nullcontext()
    with bar as progress:
        report = import_transcripts(
            store, data, fmt, max_message_bytes=ctx.settings.max_message_bytes,
            source=None if file == "-" else str(Path(file).resolve()),
            progress=progress.update if progress is not None else None)
    output(report.to_json(), as_json, lambda: _print(report))
    click.get_current_context().exit(2 if report.skipped else 0)


def _print(report: ImportReport) -> None:
    for entry in report.imported:
        origin = f" (id {entry['source_id']})" if entry["source_id"] else ""
        empty = f" ({_empty(entry['empty_messages'])})" if entry["empty_messages"] else ""
        click.echo(f"{entry['conversation_id']}  {entry['where']}{origin}, "
                   f"{entry['items']} items{empty}")
    for bad in report.skipped:
        click.echo(f"skipped {bad.where}: {bad.error}", err=True)
    click.echo(f"imported {len(report.imported)} conversations; "
               f"{len(report.already_imported)} already imported; "
               f"{len(report.skipped)} skipped", err=True)
    if report.empty_messages:
        click.echo(f"{_empty(report.empty_messages)}: recorded with no text; an empty user "
                   "message is never sent to a model", err=True)


def _empty(count: int) -> str:
    return f"kept {count} empty message{'s' if count != 1 else ''}"
