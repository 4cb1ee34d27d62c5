"""``threadline memory list|show|add|edit|delete|export|import|learn|recall|jobs``: what is
remembered about a user, under the user's control."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from threadline.cli._common import (
    Context,
    confirm,
    emit_json,
    json_option,
    model_option,
    one_line,
    output,
    pass_context,
    table,
    user_option,
    yes_option,
)
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

# how recall scores, shared with threadline eval locomo
RECALL_THRESHOLD = click.option(
    "--threshold", type=click.FloatRange(0, 1),
    help=f"The score a piece of evidence needs: its fused rank, the share of the words it "
         f"covers and time, weighted (default {THRESHOLD}); with --dense also its "
         f"similarity (default {DENSE_THRESHOLD}).")
RECALL_DENSE = click.option(
    "--dense", is_flag=True, help="Recall with embeddings too (the dense extra; also "
                                  "THREADLINE_MEMORY_DENSE=1).")


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
@user_option()
@click.option("--all", "everything", is_flag=True,
              help="Also revised, withdrawn, expired and past entries.")
@json_option()
@pass_context
def list_(ctx: Context, user_id: str, everything: bool, as_json: bool) -> None:
    """List a user's memory entries (current ones unless --all)."""
    entries = ctx.memory().entries(user_id, history=everything)
    output([e.to_json() for e in entries], as_json, lambda: _list(user_id, entries))


def _list(user_id: str, entries: list[MemoryEntry]) -> None:
    if not entries:
        click.echo(f"nothing remembered about {user_id}")
        return
    table([[e.id, str(e.kind), str(e.source), "yes" if e.trusted else "no",
            format_time(e.recorded_at)[:10], one_line(e.text, 60)] for e in entries],
          ["ID", "KIND", "SOURCE", "TRUSTED", "RECORDED", "TEXT"])


@memory.command()
@click.argument("entry_id", metavar="ENTRY")
@user_option()
@json_option()
@pass_context
def show(ctx: Context, entry_id: str, user_id: str, as_json: bool) -> None:
    """One entry with its provenance and history links."""
    shown = ctx.memory().get(user_id, entry_id).to_json()
    output(shown, as_json, "\n".join(f"{key:>15}: {value}" for key, value in shown.items()
                                      if value not in (None, [])))


@memory.command()
@click.argument("text")
@user_option()
@click.option("--kind", type=click.Choice([k.value for k in MemoryKind]), default="fact",
              show_default=True)
@click.option("--source", type=click.Choice([s.value for s in Source]),
              default="user_stated", show_default=True)
@click.option("--valid-from", metavar="DATE")
@click.option("--valid-to", metavar="DATE")
@click.option("--expires", metavar="DATE",
              help="Delete it then (memory delete --expired, the retention job).")
@json_option()
@pass_context
def add(ctx: Context, text: str, user_id: str, kind: str, source: str,
        valid_from: str | None, valid_to: str | None, expires: str | None,
        as_json: bool) -> None:
    """Remember TEXT about a user."""
    entry = ctx.memory().add(user_id, NewMemory(
        text, MemoryKind(kind), Source(source), valid_from=_when(valid_from),
        valid_to=_when(valid_to), expires_at=_when(expires)))
    output(entry.to_json(), as_json, entry.id)


@memory.command()
@click.argument("entry_id", metavar="ENTRY")
@click.argument("text")
@user_option()
@json_option()
@pass_context
def edit(ctx: Context, entry_id: str, text: str, user_id: str, as_json: bool) -> None:
    """Correct an entry: the old text is kept as history, the new one is user-stated."""
    entry = ctx.memory().correct(user_id, entry_id, text)
    output(entry.to_json(), as_json, entry.id)


@memory.command()
@click.argument("entry_id", metavar="[ENTRY]", required=False)
@user_option("Whose memory (with ENTRY or --all).", required=False)
@click.option("--all", "everything", is_flag=True,
              help="Everything remembered about U, history included (what memory list --all "
                   "shows), and the writer's queue for U.")
@click.option("--expired", is_flag=True,
              help="Every user's entries past their --expires date: the retention job, to "
                   "run on a schedule.")
@yes_option()
@json_option()
@pass_context
def delete(ctx: Context, entry_id: str | None, user_id: str | None, everything: bool,
           expired: bool, yes: bool, as_json: bool) -> None:
    """Delete memory for real: one ENTRY (with the entries it replaced), --all of a user's,
    or every user's --expired entries.

    Forgetting a user is --all, not a verb of its own: removal is always delete, and --all
    deletes exactly what memory list --all shows."""
    if (entry_id is not None) + everything + expired != 1:
        raise InputError("say what to delete: an ENTRY, --all or --expired (one of them); "
                         "nothing was deleted",
                         hint="e.g. threadline memory delete --user U ENTRY")
    store = ctx.memory()
    if expired:
        if user_id is not None:
            raise InputError("--expired deletes every user's expired entries; it takes no "
                             "--user; nothing was deleted")
        confirm("delete every user's expired memory entries", yes)
        deleted = store.purge_expired()
        output({"deleted": deleted}, as_json, f"deleted {deleted} expired entries")
        return
    if user_id is None:
        which = "--all" if everything else "ENTRY"
        raise InputError(f"{which} needs --user U; nothing was deleted",
                         hint=f"e.g. threadline memory delete --user U {which}")
    if everything:
        count = len(store.entries(user_id, history=True))
        confirm(f"delete everything remembered about {user_id} ({count} entries)", yes)
        gone = store.forget(user_id)
        output({"user_id": user_id, "deleted": gone}, as_json,
               f"deleted everything remembered about {user_id}: {gone} entries")
        return
    assert entry_id is not None
    entry = store.get(user_id, entry_id)  # an unknown entry fails before the question
    confirm(f"delete memory entry {entry_id} of {user_id} ({one_line(entry.text, 50)})", yes)
    store.delete(user_id, entry_id)
    output({"user_id": user_id, "deleted": entry_id}, as_json, f"deleted {entry_id}")


@memory.command()
@user_option()
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
@user_option()
@click.option("--trust", is_flag=True,
              help="Keep each entry's recorded source (and so its trust) instead of "
                   "marking it imported.")
@json_option()
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
    output({"user_id": user_id, "imported": len(added), "skipped": plan.skipped,
            "entries": [e.id for e in added]}, as_json,
           f"imported {len(added)} entries for {user_id} ({plan.skipped} history entries "
           "skipped)")


@memory.command()
@click.option("--limit", type=click.IntRange(1), default=1000, show_default=True)
@model_option("Also ask this model for the facts in each message (its JSON is schema-checked, "
              "and a fact must quote the user).", default="rules only")
@json_option()
@pass_context
def learn(ctx: Context, limit: int, model_name: str | None, as_json: bool) -> None:
    """Run the memory writer over the queued messages (turns sent with --user), then the
    retention purge."""
    store = ctx.store()  # MemoryWriter refuses one that keeps no memory (store.memory None)
    model = ctx.model(model_name) if model_name else None
    writer = MemoryWriter(store, ctx.memory(), model=model, vectors=ctx.vectors())
    done = writer.run(limit)
    stats = writer.stats()

    def human() -> None:
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(stats["decisions"].items()))
        click.echo(f"learned from {done} messages; decisions so far: {decisions or '—'}")
        if stats["model_outputs"]:
            click.echo(f"model extraction: {stats['schema_valid']} of "
                       f"{stats['model_outputs']} answers schema-valid "
                       f"({stats['schema_validity_rate']:.0%})")

    output({"learned_from": done, **stats}, as_json, human)


@memory.command()
@click.argument("text")
@user_option()
@click.option("--k", "k", type=click.IntRange(1), default=K, show_default=True)
@RECALL_THRESHOLD
@RECALL_DENSE
@json_option()
@pass_context
def recall(ctx: Context, text: str, user_id: str, k: int, threshold: float | None,
           dense: bool, as_json: bool) -> None:
    """What a turn sent by the user with TEXT would recall: the entries, their scores and
    provenance, exactly as the model would be shown them."""
    found = ctx.recall(k=k, threshold=threshold, dense=dense).recall(user_id, text)
    output({**found.to_json(), "text": found.render()}, as_json, found.render())


@memory.command()
@click.option("--status", type=click.Choice(["pending", "done", "failed"]))
@json_option()
@pass_context
def jobs(ctx: Context, status: str | None, as_json: bool) -> None:
    """The writer's queue, with what its gate decided for each message."""
    store = ctx.store()
    found = MemoryWriter(store, ctx.memory()).jobs(status)

    def human() -> None:
        for job in found:
            decided = ", ".join(d["decision"] for d in job["decisions"] or []) or "—"
            click.echo(f"{job['conversation_id']}#{job['seq']} {job['user_id']} "
                       f"{job['status']} (attempts {job['attempts']}): {decided}")

    output(found, as_json, human)
