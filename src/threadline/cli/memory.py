"""``threadline memory list|show|add|edit|delete|export|import|purge`` and ``threadline
forget``: what is remembered about a user, under the user's control."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from threadline.cli._common import Context, emit_json, one_line, pass_context, table
from threadline.errors import InputError
from threadline.items import format_time
from threadline.memory import MemoryEntry, MemoryKind, NewMemory, Source
from threadline.memory.recall import DENSE_THRESHOLD, THRESHOLD, K
from threadline.memory.transfer import (
    export_document,
    read_import,
    safe_export_path,
    write_atomically,
)
from threadline.memory.writer import MemoryWriter
from threadline.models import MODELS

_USER = click.option("--user", "user_id", required=True, metavar="U", help="Whose memory.")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
# how recall scores, shared with threadline eval locomo
RECALL_THRESHOLD = click.option(
    "--threshold", type=click.FloatRange(0, 1),
    help=f"The score an entry needs: the share of the words it covers (default {THRESHOLD}), "
         f"with --dense the mean of that and its similarity (default {DENSE_THRESHOLD}).")
RECALL_DENSE = click.option(
    "--dense", is_flag=True, help="Recall with embeddings too (the dense extra; also "
                                  "THREADLINE_MEMORY_DENSE=1).")


def _written(entry: MemoryEntry, as_json: bool) -> None:
    """What add and edit print: the entry as JSON, or its id."""
    if as_json:
        emit_json(entry.to_json())
    else:
        click.echo(entry.id)


def _when(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"not a date: {value!r}", hint="use ISO 8601, e.g. 2026-07-31") from None
    return moment if moment.tzinfo else moment.astimezone()


@click.group()
def memory() -> None:
    """What threadline remembers about a user: list, correct, delete, export, import."""


@memory.command(name="list")
@_USER
@click.option("--all", "everything", is_flag=True,
              help="Also revised, withdrawn, expired and past entries.")
@_JSON
@pass_context
def list_(ctx: Context, user_id: str, everything: bool, as_json: bool) -> None:
    """List a user's memory entries (current ones unless --all)."""
    entries = ctx.memory().entries(user_id, history=everything)
    if as_json:
        emit_json([e.to_json() for e in entries])
        return
    if not entries:
        click.echo(f"nothing remembered about {user_id}")
        return
    table([[e.id, str(e.kind), str(e.source), "yes" if e.trusted else "no",
            format_time(e.recorded_at)[:10], one_line(e.text, 60)] for e in entries],
          ["ID", "KIND", "SOURCE", "TRUSTED", "RECORDED", "TEXT"])


@memory.command()
@click.argument("entry_id", metavar="ID")
@_USER
@_JSON
@pass_context
def show(ctx: Context, entry_id: str, user_id: str, as_json: bool) -> None:
    """One entry with its provenance and history links."""
    entry = ctx.memory().get(user_id, entry_id)
    if as_json:
        emit_json(entry.to_json())
        return
    for key, value in entry.to_json().items():
        if value not in (None, []):
            click.echo(f"{key:>15}: {value}")


@memory.command()
@click.argument("text")
@_USER
@click.option("--kind", type=click.Choice([k.value for k in MemoryKind]), default="fact",
              show_default=True)
@click.option("--source", type=click.Choice([s.value for s in Source]),
              default="user_stated", show_default=True)
@click.option("--valid-from", metavar="DATE")
@click.option("--valid-to", metavar="DATE")
@click.option("--expires", metavar="DATE", help="Delete it then (the retention purge).")
@_JSON
@pass_context
def add(ctx: Context, text: str, user_id: str, kind: str, source: str,
        valid_from: str | None, valid_to: str | None, expires: str | None,
        as_json: bool) -> None:
    """Remember TEXT about a user."""
    entry = ctx.memory().add(user_id, NewMemory(
        text, MemoryKind(kind), Source(source), valid_from=_when(valid_from),
        valid_to=_when(valid_to), expires_at=_when(expires)))
    _written(entry, as_json)


@memory.command()
@click.argument("entry_id", metavar="ID")
@click.argument("text")
@_USER
@_JSON
@pass_context
def edit(ctx: Context, entry_id: str, text: str, user_id: str, as_json: bool) -> None:
    """Correct an entry: the old text is kept as history, the new one is user-stated."""
    store = ctx.memory()
    old = store.get(user_id, entry_id)
    entry = store.update(user_id, entry_id, NewMemory(
        text, old.kind, Source.USER_STATED, old.conversation_id, old.item_seqs,
        old.valid_from, old.valid_to, old.expires_at), reason="edited by the user")
    _written(entry, as_json)


@memory.command()
@click.argument("entry_id", metavar="ID")
@_USER
@pass_context
def delete(ctx: Context, entry_id: str, user_id: str) -> None:
    """Delete an entry for real, with the entries it replaced."""
    ctx.memory().delete(user_id, entry_id)
    click.echo(f"deleted {entry_id}")


@memory.command()
@_USER
@click.option("--out", type=click.Path(path_type=Path), metavar="FILE",
              help="Write the JSON to FILE instead of standard output.")
@click.option("--dir", "directory", type=click.Path(path_type=Path), metavar="DIR",
              help="Write DIR/<user id, percent-encoded>.json; never a path outside DIR.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@pass_context
def export(ctx: Context, user_id: str, out: Path | None, directory: Path | None,
           force: bool) -> None:
    """Everything remembered about a user, history included, as JSON.

    On standard output unless --out or --dir; a file is written whole or not at all."""
    if out is not None and directory is not None:
        raise InputError("pass --out or --dir, not both; nothing was written")
    if force and out is None and directory is None:
        raise InputError("--force only applies with --out or --dir")
    store = ctx.memory()
    # the path is checked before the store is read, so a refused export costs nothing
    target = safe_export_path(directory, user_id) if directory is not None else out
    document = export_document(store, user_id)
    if target is None:
        emit_json(document)
        return
    write_atomically(target, json.dumps(document, ensure_ascii=False, indent=2) + "\n",
                     force=force)
    click.echo(str(target))


@memory.command(name="import")
@click.argument("file", type=click.Path(path_type=Path), metavar="FILE")
@_USER
@click.option("--trust", is_flag=True,
              help="Keep each entry's recorded source (and so its trust) instead of "
                   "marking it imported.")
@_JSON
@pass_context
def import_memory(ctx: Context, file: Path, user_id: str, trust: bool, as_json: bool) -> None:
    """Add the current entries of a memory export (FILE) to a user's memory.

    The file must be the same user's export. Everything is checked first and added in one
    transaction: a bad file or entry adds nothing. Revised, withdrawn and expired entries
    are skipped; links to conversations are dropped."""
    store = ctx.memory()
    plan = read_import(file, user_id, now=store.clock(), trust=trust,
                       max_text_bytes=store.max_text_bytes)
    added = store.add_many(user_id, plan.memories)
    if as_json:
        emit_json({"user_id": user_id, "imported": len(added), "skipped": plan.skipped,
                   "entries": [e.id for e in added]})
        return
    click.echo(f"imported {len(added)} entries for {user_id} "
               f"({plan.skipped} history entries skipped)")


@memory.command()
@_JSON
@pass_context
def purge(ctx: Context, as_json: bool) -> None:
    """Delete every user's expired entries, for real (the retention job).

    Entries expire at the date given with --expires; run this on a schedule."""
    deleted = ctx.memory().purge_expired()
    if as_json:
        emit_json({"deleted": deleted})
        return
    click.echo(f"deleted {deleted} expired entries")


@click.command()
@_USER
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_context
def forget(ctx: Context, user_id: str, yes: bool) -> None:
    """Delete everything remembered about a user."""
    if not yes:
        click.confirm(f"delete everything remembered about {user_id}?", abort=True)
    gone = ctx.memory().forget(user_id)
    click.echo(f"forgot {user_id}: {gone} entries deleted")


@memory.command()
@click.option("--limit", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--model", "model_name", type=click.Choice(sorted(MODELS)),
              help="Also ask this model for the facts in each message (its JSON is "
                   "schema-checked, and a fact must quote the user). Default: rules only.")
@_JSON
@pass_context
def learn(ctx: Context, limit: int, model_name: str | None, as_json: bool) -> None:
    """Run the memory writer over the queued messages (turns sent with --user), then the
    retention purge."""
    store = ctx.store()  # MemoryWriter refuses one that keeps no memory (store.memory None)
    model = ctx.model(model_name) if model_name else None
    writer = MemoryWriter(store, ctx.memory(), model=model, vectors=ctx.vectors())
    done = writer.run(limit)
    stats = writer.stats()
    if as_json:
        emit_json({"learned_from": done, **stats})
        return
    click.echo(f"learned from {done} messages; decisions so far: "
               f"{', '.join(f'{k} {v}' for k, v in sorted(stats['decisions'].items())) or '—'}")
    if stats["model_outputs"]:
        click.echo(f"model extraction: {stats['schema_valid']} of {stats['model_outputs']} "
                   f"answers schema-valid ({stats['schema_validity_rate']:.0%})")


@memory.command()
@click.argument("text")
@_USER
@click.option("--k", "k", type=click.IntRange(1), default=K, show_default=True)
@RECALL_THRESHOLD
@RECALL_DENSE
@_JSON
@pass_context
def recall(ctx: Context, text: str, user_id: str, k: int, threshold: float | None,
           dense: bool, as_json: bool) -> None:
    """What a turn sent by the user with TEXT would recall: the entries, their scores and
    provenance, exactly as the model would be shown them."""
    found = ctx.recall(k=k, threshold=threshold, dense=dense).recall(user_id, text)
    if as_json:
        emit_json({**found.to_json(), "text": found.render()})
        return
    click.echo(found.render())


@memory.command()
@click.option("--status", type=click.Choice(["pending", "done", "failed"]))
@_JSON
@pass_context
def jobs(ctx: Context, status: str | None, as_json: bool) -> None:
    """The writer's queue, with what its gate decided for each message."""
    store = ctx.store()
    found = MemoryWriter(store, ctx.memory()).jobs(status)
    if as_json:
        emit_json(found)
        return
    for job in found:
        decided = ", ".join(d["decision"] for d in job["decisions"] or []) or "—"
        click.echo(f"{job['conversation_id']}#{job['seq']} {job['user_id']} {job['status']} "
                   f"(attempts {job['attempts']}): {decided}")
