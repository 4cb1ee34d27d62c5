"""``threadline chat``: an interactive, streaming conversation, or one turn with ``--once``."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from threadline.cli._common import (
    Context,
    branch_option,
    emit_json,
    json_option,
    model_option,
    one_line,
    pass_context,
    user_option,
)
from threadline.engine import Engine, TurnResult
from threadline.errors import InputError, InvalidEncoding, ModelError, ThreadlineError
from threadline.items import ItemKind, decode_utf8, validate_text
from threadline.providers.retrieval import CorpusSearch
from threadline.stores import MAIN
from threadline.turn.input import TurnInput
from threadline.turn.providers import recorded

_HELP = """commands:
  /retry   answer the last message again (after a failed or cancelled turn)
  /new     start a new conversation
  /info    show the conversation id, branch and model
  /exit    leave (Ctrl-D works too)"""


@click.command()
@click.option("--conversation", "conversation_id", metavar="ID",
              help="Continue this conversation. Default: the most recent one (--once: a new "
                   "one).")
@click.option("--new", "new", is_flag=True, help="Start a new conversation.")
@branch_option("Branch to continue.")
@model_option()
@click.option("--system", help="System prompt for a new conversation.")
@click.option("--once", metavar="TEXT",
              help="Send one message (- reads it from stdin), print the reply and exit.")
@click.option("--client-msg-id", metavar="X",
              help="With --once: an id for the message; resending it returns the first result.")
@click.option("--corpus", metavar="NAME",
              help="Answer from this corpus: each message is rewritten into a standalone "
                   "query and the passages it finds are shown to the model, to cite by id.")
@user_option("Whose conversation: what is remembered about U that bears on a message is "
             "recalled into its turn, and the memory writer learns from U's messages "
             "(threadline memory learn).", required=False)
@json_option("With --once: print one JSON object.")
@pass_context
def chat(ctx: Context, conversation_id: str | None, new: bool, branch: str,
         model_name: str | None, system: str | None, once: str | None,
         client_msg_id: str | None, corpus: str | None, user_id: str | None,
         as_json: bool) -> None:
    """Talk to the model; every turn is saved as it happens."""
    if new and conversation_id:
        raise click.UsageError("--new and --conversation exclude each other")
    if once is None and (as_json or client_msg_id):
        raise click.UsageError("--json and --client-msg-id need --once")
    settings = ctx.settings
    text = None
    if once is not None:
        text = decode_utf8(sys.stdin.buffer.read(), "standard input") if once == "-" else once
        validate_text(text, max_bytes=settings.max_message_bytes)
    model = ctx.model(model_name)  # a missing model fails before the store is touched
    store = ctx.store()
    if conversation_id is not None:
        store.conversation(conversation_id)
        store.head(conversation_id, branch)  # unknown branches fail here, not mid-turn
    if corpus is not None:
        ctx.corpora().search_ready(corpus)  # an unknown corpus fails before anything else
    engine = ctx.engine(model, system=system)
    if text is not None:
        _once(engine, text, conversation_id, branch, client_msg_id, as_json, corpus, user_id)
        return
    if conversation_id is None and not new:
        latest = store.conversations(limit=1)
        conversation_id = latest[0].conversation.id if latest else None
    click.get_current_context().exit(
        _Session(engine, conversation_id, branch, corpus, user_id).run())


def _once(engine: Engine, text: str, conversation_id: str | None, branch: str,
          client_msg_id: str | None, as_json: bool, corpus: str | None = None,
          user_id: str | None = None) -> None:
    stream = _Stream()
    result = engine.run_turn(text, conversation_id=conversation_id, branch=branch,
                             client_msg_id=client_msg_id, on_text=None if as_json else stream,
                             user_id=user_id, options=_search(corpus))
    if as_json:
        emit_json(turn_json(engine, result))
    else:
        stream.end(result)


class _Stream:
    """Prints a reply's pieces as they arrive; a reply that arrived without any (a resent
    message's first result, the trajectory monitor's refusal, a reply a provider served) is
    printed whole when the turn ends."""

    def __init__(self) -> None:
        self.streamed = False

    def __call__(self, piece: str) -> None:
        self.streamed = True
        click.echo(piece, nl=False)
        sys.stdout.flush()

    def end(self, result: TurnResult) -> None:
        click.echo(None if self.streamed else result.reply.text)


def _search(corpus: str | None) -> tuple[CorpusSearch, ...]:
    return () if corpus is None else (CorpusSearch(corpus),)


def turn_json(engine: Engine, result: TurnResult) -> dict[str, Any]:
    """A turn as JSON, with its rewritten query and passages when it searched a corpus."""
    out = result.to_json()
    history = engine.store.history(result.conversation_id, result.branch)
    found = recorded(history, result.message, ItemKind.RETRIEVAL)
    if found is not None:
        content = found.content
        out["retrieval"] = {"raw": content["raw"], "query": content["query"],
                            "winner": content.get("winner"),
                            "latency_ms": content.get("latency_ms"), "corpus": content["corpus"],
                            "passages": content["passages"], "seq": found.seq}
    recalled = recorded(history, result.message, ItemKind.RECALL)
    if recalled is not None:
        out["memory"] = {"query": recalled.content["query"], "seq": recalled.seq,
                         "memories": recalled.content["memories"]}
    return out


class _Session:
    def __init__(self, engine: Engine, conversation_id: str | None, branch: str,
                 corpus: str | None = None, user_id: str | None = None) -> None:
        self.engine = engine
        self.corpus, self.user_id = corpus, user_id
        self.conversation_id = conversation_id
        self.branch = branch
        self.rejected = 0
        self.interactive = sys.stdin.isatty()
        if self.interactive:
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (line editing and up-arrow recall for input())

    def run(self) -> int:
        self._banner()
        while True:
            line = self._read()
            if line is None:
                break
            command = line.strip()
            if not command:
                continue
            if command in ("/exit", "/quit"):
                break
            if command == "/help":
                click.echo(_HELP)
            elif command == "/new":
                self.conversation_id, self.branch = None, MAIN
                click.echo("(new conversation starts with your next message)")
            elif command == "/info":
                click.echo(f"conversation {self.conversation_id or '(new)'} · branch "
                           f"{self.branch} · model {self.engine.model.model_id}")
            elif command == "/retry":
                self._turn(None)
            else:
                self._turn(line)
        return 2 if self.rejected else 0

    def _banner(self) -> None:
        click.echo(f"threadline chat · model {self.engine.model.model_id} · /help for commands",
                   err=True)
        if self.conversation_id is None:
            return
        history = self.engine.store.history(self.conversation_id, self.branch)
        turns = history[-1].turn if history else 0
        click.echo(f"continuing {self.conversation_id} (branch {self.branch}, {turns} "
                   f"turn{'' if turns == 1 else 's'}; --new starts another)", err=True)
        for item in history[-4:]:
            if item.kind in (ItemKind.USER, ItemKind.ASSISTANT):
                who = "you" if item.kind is ItemKind.USER else "model"
                click.secho(f"  {who}: {one_line(item.text)}", dim=True, err=True)

    def _read(self) -> str | None:
        try:
            if self.interactive:
                return input("you> ")
            raw = sys.stdin.buffer.readline()
            return None if not raw else decode_utf8(raw, "standard input").rstrip("\r\n")
        except EOFError:
            return None
        except KeyboardInterrupt:
            click.echo()
            return None
        except UnicodeDecodeError as err:
            raise InvalidEncoding("standard input", err) from err

    def _turn(self, text: str | None) -> None:
        stream = _Stream()
        click.echo("model> ", nl=False)
        try:
            if text is None:
                if self.conversation_id is None:
                    raise InputError("there is no conversation yet; send a message first")
                result = self.engine.answer(TurnInput(
                    conversation_id=self.conversation_id, branch=self.branch,
                    user_id=self.user_id, options=_search(self.corpus)), on_text=stream)
            else:
                result = self.engine.run_turn(text, conversation_id=self.conversation_id,
                                              branch=self.branch, on_text=stream,
                                              user_id=self.user_id,
                                              options=_search(self.corpus))
        except KeyboardInterrupt:
            click.echo("\n(cancelled; the turn is saved as failed — /retry answers it)")
            return
        except ThreadlineError as err:
            click.echo()
            click.secho(f"error: {err}", fg="red", err=True)
            if isinstance(err, InputError):
                self.rejected += 1
            if isinstance(err, ModelError):
                click.echo("(/retry answers the message again)", err=True)
            return
        stream.end(result)
        self.conversation_id, self.branch = result.conversation_id, result.branch
        self._stats(result)

    def _stats(self, result: TurnResult) -> None:
        usage, timings = result.call.usage, result.call.timings
        ttft = "-" if timings.ttft_ms is None else f"{timings.ttft_ms:.0f} ms"
        recalled = ""
        if self.user_id is not None:
            found = recorded(self.engine.store.history(result.conversation_id,
                                                           result.branch),
                                 result.message, ItemKind.RECALL)
            count = 0 if found is None else len(found.content["memories"])
            recalled = f" · {count} memor{'y' if count == 1 else 'ies'} recalled"
        click.secho(f"[turn {result.turn} · prompt {usage.prompt_tokens} tokens, "
                    f"{usage.cached_tokens} cached · first token {ttft}{recalled}]", dim=True,
                    err=True)
