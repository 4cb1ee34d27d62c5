"""Moving a user's memory in and out of threadline as a JSON document.

``threadline memory export`` writes ``{"user_id": ..., "entries": [...]}``; ``import`` reads
one back. User ids come from the application, so they are never trusted as file names: a
name is percent-encoded down to ``[A-Za-z0-9_-]`` and the resolved path must be the file in
the export directory itself. An import file is checked whole before anything is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from threadline.errors import InputError, InvalidEncoding
from threadline.items import parse_time
from threadline.memory.store import (
    MAX_TEXT_BYTES,
    MemoryKind,
    MemoryStore,
    NewMemory,
    Source,
    user_id_checked,
)

MAX_IMPORT_BYTES = 16 * 1024 * 1024
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_MAX_NAME = 200  # file systems cap a name at 255 bytes; leave room for ".json" and temp names
_HINT = "import a file written by: threadline memory export --user U --out FILE"


def export_document(store: MemoryStore, user_id: str) -> dict[str, Any]:
    """Everything remembered about the user, history included."""
    return {"user_id": user_id,
            "entries": [e.to_json() for e in store.entries(user_id, history=True)]}


def safe_name(user_id: str) -> str:
    """A file name for the user that cannot leave or hide in a directory: every byte outside
    ``[A-Za-z0-9_-]`` (``%`` included, so distinct ids stay distinct) becomes ``%XX``."""
    name = "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}"
                   for b in user_id_checked(user_id).encode("utf-8"))
    if len(name) > _MAX_NAME:  # "~" is always encoded, so it marks a shortened name
        name = name[:_MAX_NAME - 33] + "~" + hashlib.sha256(user_id.encode()).hexdigest()[:32]
    return name


def safe_export_path(directory: Path, user_id: str) -> Path:
    """``directory/<safe name>.json``, refused unless it resolves to exactly that file."""
    root = Path(os.path.realpath(directory))
    if not root.is_dir():
        raise InputError(f"no directory {directory}; nothing was written",
                         hint="create it first, or use --out FILE")
    target = root / f"{safe_name(user_id)}.json"
    resolved = Path(os.path.realpath(target))
    # a link planted at the target could point anywhere, inside the directory or out of it
    if resolved != target or not resolved.is_relative_to(root):
        raise InputError(f"{target} resolves to {resolved}, not a file of its own in {root}; "
                         "nothing was written", hint="remove the link, or export elsewhere")
    return target


def write_atomically(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory, so a
    reader never sees half a file; an existing file is replaced only with ``force``."""
    if path.is_dir():
        raise InputError(f"{path} is a directory; nothing was written",
                         hint="name a file, or use --dir DIR")
    if os.path.lexists(path) and not force:
        raise InputError(f"{path} already exists; nothing was written",
                         hint="pass --force to overwrite it")
    try:
        # mkstemp creates the file 0600: an export is personal data
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tl-export-", suffix=".tmp")
    except OSError as err:
        raise _unwritable(path, err) from err
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)  # replaces a link itself, never the file it points to
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(err, OSError):
            raise _unwritable(path, err) from err
        raise


def _unwritable(path: Path, err: OSError) -> InputError:
    return InputError(f"cannot write {path}: {err.strerror}; nothing was written",
                      hint="check that its directory exists and is writable")


@dataclass(frozen=True)
class ImportPlan:
    """What an import file holds: the entries to add, and how many it leaves out."""

    memories: list[NewMemory]
    skipped: int


def read_import(path: Path, user_id: str, *, now: datetime, trust: bool = False,
                max_text_bytes: int = MAX_TEXT_BYTES) -> ImportPlan:
    """Read and check an export document for ``user_id``; InputError on anything wrong.

    Only current entries are kept: revised or withdrawn ones (``invalidated_at`` set) and
    expired ones (the retention purge would delete them) are counted as skipped. The
    conversation they came from may not exist here, so that link is dropped, and the source
    becomes ``imported`` unless ``trust`` (then a valid recorded source is kept)."""
    document = _load(path)
    if not isinstance(document, dict) or not isinstance(document.get("entries"), list):
        raise InputError(f"{path} is not a memory export (no entries list); nothing was "
                         "imported", hint=_HINT)
    owner = document.get("user_id")
    if owner != user_id:
        raise InputError(f"{path} holds the memory of user {owner!r}, not {user_id!r}: "
                         "importing another user's memory is refused; nothing was imported",
                         hint=f"import it with --user {owner}" if isinstance(owner, str)
                         else _HINT)
    memories, skipped = [], 0
    for index, raw in enumerate(document["entries"]):
        memory, invalidated = _memory(raw, index, trust)
        if invalidated or (memory.expires_at is not None and memory.expires_at <= now):
            skipped += 1
            continue
        size = len(memory.text.strip().encode("utf-8"))
        if size > max_text_bytes:
            raise InputError(f"entry {index}: text is {size:,} bytes, over the limit of "
                             f"{max_text_bytes:,}; nothing was imported",
                             hint="shorten it in the file")
        memories.append(memory)
    return ImportPlan(memories, skipped)


def _load(path: Path) -> Any:
    if not path.exists():
        raise InputError(f"no file {path}; nothing was imported", hint="check the path")
    if not path.is_file():
        raise InputError(f"{path} is not a file; nothing was imported", hint=_HINT)
    try:
        with path.open("rb") as source:
            data = source.read(MAX_IMPORT_BYTES + 1)  # bounded even if the file grows
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}; nothing was imported") from err
    if len(data) > MAX_IMPORT_BYTES:
        raise InputError(f"{path} is over the import limit of {MAX_IMPORT_BYTES:,} bytes; "
                         "nothing was imported", hint="split it, one user per file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidEncoding(str(path), err) from None
    try:
        return json.loads(text)
    except ValueError as err:
        raise InputError(f"{path} is not JSON ({err}); nothing was imported",
                         hint=_HINT) from None


def _memory(raw: Any, index: int, trust: bool) -> tuple[NewMemory, bool]:
    """One exported entry as a NewMemory, and whether it was revised or withdrawn."""
    def bad(field: str, why: str) -> InputError:
        return InputError(f"entry {index}: {field} {why}; nothing was imported", hint=_HINT)

    if not isinstance(raw, Mapping):
        raise bad("the entry", "is not an object")
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        raise bad("text", "must be a non-empty string")
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in {k.value for k in MemoryKind}:
        raise bad("kind", f"must be one of {', '.join(MemoryKind)}")
    recorded = raw.get("source")
    source = Source.IMPORTED  # whoever wrote the file could claim anything, so not trusted
    if trust and isinstance(recorded, str) and recorded in {s.value for s in Source}:
        source = Source(recorded)
    valid_from, valid_to, expires_at, invalidated_at, said_at = (
        _moment(raw, name, bad)
        for name in ("valid_from", "valid_to", "expires_at", "invalidated_at", "recorded_at"))
    if valid_from and valid_to and valid_to <= valid_from:
        raise bad("valid_to", "is not after valid_from")
    # recorded_at is when the user said it: a restored entry keeps "said on 3 May 2026"
    return NewMemory(text, MemoryKind(kind), source, None, (), valid_from, valid_to,
                     expires_at, recorded_at=said_at), invalidated_at is not None


def _moment(raw: Mapping[str, Any], name: str,
            bad: Callable[[str, str], InputError]) -> datetime | None:
    value = raw.get(name)
    if value is None:
        return None
    try:
        moment = parse_time(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:  # naive times would compare wrongly
        raise bad(name, "must be null or an ISO 8601 time with a zone")
    return moment
