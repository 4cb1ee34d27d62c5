"""KV snapshots: the key/value state of an evaluated token sequence, and what it is valid for.

A snapshot is never trusted by its name alone. It records the identity of what produced it
(the model file, the context size, the KV cache's element types, the llama.cpp build); one
whose identity differs from the running model's is not used. On disk it is one file, a header
and the state, with the state's length and BLAKE2b in the header, so a truncated or damaged
file is recognised and ignored.

Prefixes are found by block: the tokens are cut into blocks of ``BLOCK`` and each block's key
chains the one before (as vLLM keys its KV blocks), salted with the identity, so a key names
one exact token prefix for one model and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

BLOCK = 32  # tokens per block: the finest prefix a lookup can find
MAGIC = b"TLKV1\n"
_LENGTH = struct.Struct("<Q")


class DamagedSnapshot(Exception):
    """A snapshot file that cannot be used: truncated, damaged, or not a snapshot."""


@dataclass(frozen=True)
class Identity:
    """What a snapshot's state is valid for: any difference and it is not restored."""

    model: str      # the model file: name, size and a hash of its first and last MiB
    n_ctx: int
    kv_type: str    # the K and V element types
    build: str      # the llama.cpp build

    @property
    def key(self) -> str:
        text = json.dumps([self.model, self.n_ctx, self.kv_type, self.build])
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    @classmethod
    def of_file(cls, path: Path, *, n_ctx: int, kv_type: str, build: str) -> Identity:
        size = path.stat().st_size
        digest = hashlib.blake2b(digest_size=16)
        with path.open("rb") as handle:
            digest.update(handle.read(1 << 20))
            handle.seek(max(0, size - (1 << 20)))
            digest.update(handle.read(1 << 20))
        return cls(f"{path.name}:{size}:{digest.hexdigest()}", n_ctx, kv_type, build)


def block_keys(identity: Identity, tokens: Sequence[int]) -> list[str]:
    """The chained key of each full block of ``tokens``: ``keys[i]`` names the prefix of
    ``(i + 1) * BLOCK`` tokens."""
    keys: list[str] = []
    parent = identity.key
    for start in range(0, len(tokens) - BLOCK + 1, BLOCK):
        block = array("i", tokens[start:start + BLOCK]).tobytes()
        parent = hashlib.blake2b(parent.encode() + block, digest_size=16).hexdigest()
        keys.append(parent)
    return keys


def prefix_key(identity: Identity, tokens: Sequence[int]) -> str:
    """The name of exactly this token sequence, for this identity."""
    data = identity.key.encode() + array("i", tokens).tobytes()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """The KV state of ``tokens`` evaluated in order from position 0 (no logits)."""

    identity: Identity
    tokens: tuple[int, ...]
    state: bytes = field(repr=False)

    @cached_property  # looked up several times per keep; the tokens never change
    def key(self) -> str:
        return prefix_key(self.identity, self.tokens)

    @property
    def size(self) -> int:
        return len(self.state)

    def to_bytes(self) -> bytes:
        header = json.dumps({
            "identity": [self.identity.model, self.identity.n_ctx, self.identity.kv_type,
                         self.identity.build],
            "tokens": list(self.tokens), "state_bytes": len(self.state),
            "state_blake2b": hashlib.blake2b(self.state, digest_size=16).hexdigest(),
        }).encode()
        return MAGIC + _LENGTH.pack(len(header)) + header + self.state


@dataclass(frozen=True)
class Header:
    """A snapshot file's header: enough to index it without reading its state."""

    identity: Identity
    tokens: tuple[int, ...]
    state_bytes: int
    state_digest: str
    offset: int  # where the state starts in the file


def read_header(data: bytes) -> Header:
    """The header at the start of a snapshot file's bytes (at least its header's)."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _LENGTH.size:
        raise DamagedSnapshot("not a threadline KV snapshot")
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _LENGTH.size
    if len(data) < start + length:
        raise DamagedSnapshot("the header is cut short")
    try:
        raw: Any = json.loads(data[start:start + length])
        model, n_ctx, kv_type, build = raw["identity"]
        tokens = tuple(int(t) for t in raw["tokens"])
        return Header(Identity(str(model), int(n_ctx), str(kv_type), str(build)), tokens,
                      int(raw["state_bytes"]), str(raw["state_blake2b"]), start + length)
    except (ValueError, KeyError, TypeError) as err:
        raise DamagedSnapshot(f"the header is not valid: {err}") from err


def from_bytes(data: bytes) -> Snapshot:
    """The snapshot a file holds, checked against the length and digest its header gives."""
    header = read_header(data)
    state = data[header.offset:]
    if len(state) != header.state_bytes:
        raise DamagedSnapshot(f"the state is {len(state)} bytes, the header says "
                              f"{header.state_bytes}")
    if hashlib.blake2b(state, digest_size=16).hexdigest() != header.state_digest:
        raise DamagedSnapshot("the state does not match its checksum")
    return Snapshot(header.identity, header.tokens, state)
