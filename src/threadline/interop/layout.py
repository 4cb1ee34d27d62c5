"""Where the conversations are in an import file, before any message is read.

A file is one JSON document or JSON Lines, told apart by parsing it, never by its name:

* **a JSON document**: an array of conversations, or one conversation (an array of messages or
  an object holding them), or a single message;
* **JSON Lines**: each line a whole conversation, or a single message. Consecutive
  single-message lines make one conversation: it ends at a line that is a whole conversation,
  at a line whose ``conversation_id`` differs from the line before, or at the end of the file.

A line that cannot be read is reported by its number. Single-message lines are one
conversation, imported whole or not at all, so an unreadable line among them (or just before
or after them) skips that conversation: importing the rest would drop a message silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from threadline.errors import ImportFormatError

_BOM = b"\xef\xbb\xbf"  # some editors and exporters start UTF-8 files with one


@dataclass(frozen=True)
class BadRecord:
    where: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "error": self.error}


@dataclass(frozen=True)
class Chunk:
    """One conversation's worth of the file, still raw JSON."""

    where: str   # "line 3", "lines 3-7", "record 2"
    raw: Any     # the record; for single-message lines, the list of their messages
    lines: tuple[int, ...] = ()  # for single-message lines: the line of each message
    source_id: str | None = None  # their conversation_id


IsMessage = Callable[[Any], bool]


def chunks(data: bytes, is_message: IsMessage) -> Iterator[Chunk | BadRecord]:
    """The conversations in ``data``, or why one cannot be read; ImportFormatError if the file
    as a whole is not something to import (nothing is imported from it then)."""
    data = data.removeprefix(_BOM)
    if not data.strip():
        raise ImportFormatError("the import file is empty", hint="check the path")
    document = _document(data)
    if document is None:
        yield from _runs(_lines(data), is_message)
    else:  # a one-line file is also one line of JSON Lines: its conversation is "line 1"
        one = "record 1" if _several_lines(data) else "line 1"
        yield from _document_chunks(document[0], is_message, one)


def _several_lines(data: bytes) -> bool:
    body = data.strip()
    return b"\n" in body or b"\r" in body


def _document(data: bytes) -> tuple[Any] | None:
    """The file's one JSON value, or None when it is JSON Lines."""
    try:
        text, bad_utf8 = data.decode("utf-8"), None
    except UnicodeDecodeError as err:  # parse anyway: JSON Lines reports the line itself
        text, bad_utf8 = data.decode("utf-8", "surrogateescape"), err
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        # "Extra data": a whole value, then more, so one value per line. An error on the
        # first line of several is a bad first line of JSON Lines: report it, read the rest.
        if err.msg == "Extra data" or (err.lineno == 1 and _several_lines(data)):
            return None
        if bad_utf8 is not None:
            raise _not_utf8(data, bad_utf8) from err
        raise ImportFormatError(
            f"the file is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}; "
            "nothing was imported",
            hint="fix the JSON there; in JSON Lines, each line holds a whole conversation "
                 "or one message") from err
    if bad_utf8 is not None:
        raise _not_utf8(data, bad_utf8)
    return (value,)


def _not_utf8(data: bytes, err: UnicodeDecodeError) -> ImportFormatError:
    line = data[:err.start].count(b"\n") + 1
    return ImportFormatError(f"the file is not valid UTF-8 (byte offset {err.start}, line "
                             f"{line}); nothing was imported", hint="re-export it as UTF-8")


def _document_chunks(value: Any, is_message: IsMessage, one: str) -> Iterator[Chunk]:
    if isinstance(value, list):
        if not value:
            raise ImportFormatError("the file is an empty JSON array: there is nothing to import")
        if is_message(value[0]):  # an array of messages is one conversation
            yield Chunk(one, value)
            return
        for index, entry in enumerate(value, start=1):
            yield Chunk(f"record {index}", entry)
    elif isinstance(value, dict):
        if is_message(value):
            yield Chunk(one, [value], source_id=_source_id(value))
        else:
            yield Chunk(one, value)
    else:
        raise ImportFormatError(f"the file holds a JSON {type(value).__name__}, not "
                                "conversations", hint="see docs/import.md for the layouts read")


def _lines(data: bytes) -> Iterator[tuple[int, Any]]:
    """Each non-blank line's number and JSON value (a BadRecord if it has none)."""
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            yield number, json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as err:
            yield number, BadRecord(where, f"not valid UTF-8 (byte offset {err.start})")
        except ValueError as err:
            yield number, BadRecord(where, f"not valid JSON ({err})")


def _runs(lines: Iterator[tuple[int, Any]],
          is_message: IsMessage) -> Iterator[Chunk | BadRecord]:
    run: list[tuple[int, Any]] = []  # single-message lines, and unreadable lines beside them
    last: object = _NO_MESSAGE  # the conversation_id of the run's newest message
    for number, value in lines:
        unreadable = isinstance(value, BadRecord)
        if unreadable or is_message(value):
            # an unreadable line joins the run: it may have been one of its messages
            if not unreadable:
                if last is not _NO_MESSAGE and last != _id(value):
                    yield from _close(run)
                    run = []
                last = _id(value)
            run.append((number, value))
            continue
        if run:
            yield from _close(run)
            run, last = [], _NO_MESSAGE
        yield Chunk(f"line {number}", value)
    if run:
        yield from _close(run)


_NO_MESSAGE = object()


def _id(message: Any) -> object:
    return message.get("conversation_id")


def _source_id(message: Any) -> str | None:
    conversation = _id(message)
    return None if conversation is None else str(conversation)


def _close(run: list[tuple[int, Any]]) -> Iterator[Chunk | BadRecord]:
    bad = [v for _, v in run if isinstance(v, BadRecord)]
    messages = [(n, v) for n, v in run if not isinstance(v, BadRecord)]
    if not messages:  # unreadable lines between whole conversations: each on its own
        yield from bad
        return
    first, last = run[0][0], run[-1][0]
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    if bad:
        more = f" (and {len(bad) - 1} more unreadable lines)" if len(bad) > 1 else ""
        yield BadRecord(where, f"{bad[0].where}: {bad[0].error}{more}; the single messages on "
                               f"{where} are one conversation, so none of it was imported "
                               "(fix the line and import the file again)")
        return
    yield Chunk(where, [v for _, v in messages], lines=tuple(n for n, _ in messages),
                source_id=_source_id(messages[0][1]))
