"""The KV snapshot cache, without a model: prefixes found across conversations and processes,
budgets kept, and every damaged, foreign or unwritable snapshot skipped without failing."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from threadline.models.kv import Identity, KVCache, Snapshot
from threadline.models.kv import tiers as kv_tiers
from threadline.models.kv.snapshots import BLOCK, DamagedSnapshot, from_bytes

MODEL = Identity("model.gguf:1000:abc", 4096, "1/1", "llama-cpp-python test")
OTHER = Identity("other.gguf:2000:def", 4096, "1/1", "llama-cpp-python test")
SYSTEM = tuple(range(1000, 1000 + 3 * BLOCK))  # a long shared system prompt


def _snapshot(tokens: tuple[int, ...], identity: Identity = MODEL) -> Snapshot:
    return Snapshot(identity, tokens, bytes([len(tokens) % 251]) * (len(tokens) * 8))


def _cache(folder: Path | None, *, memory: int = 1 << 20, disk: int = 1 << 20,
           identity: Identity = MODEL) -> KVCache:
    return KVCache(identity, memory_bytes=memory, folder=folder, disk_bytes=disk)


def _conversation(n: int, turns: int) -> tuple[int, ...]:
    return SYSTEM + tuple(10_000 * n + i for i in range(turns * BLOCK))


def test_the_longest_shared_prefix_is_found_whichever_conversation_made_it() -> None:
    cache = _cache(None)
    one, two = _conversation(1, 2), _conversation(2, 3)
    cache.keep(_snapshot(one))
    cache.keep(_snapshot(two))
    found = cache.find(one + (7, 7, 7))
    assert found is not None and found.snapshot.tokens == one and found.tier == "memory"
    assert found.common == len(one)
    fresh = cache.find(_conversation(3, 1))  # a new conversation shares the system prompt
    assert fresh is not None and fresh.common == len(SYSTEM)
    assert cache.find(_conversation(3, 1), better_than=len(SYSTEM)) is None  # held already
    assert cache.find((5,) * (4 * BLOCK)) is None
    assert cache.counts == {"memory": 2, "disk": 0, "miss": 2, "kept": 2}


def test_a_snapshot_that_extends_another_replaces_it() -> None:
    cache = _cache(None)
    first, longer = _conversation(1, 1), _conversation(1, 3)
    cache.keep(_snapshot(first))
    cache.keep(_snapshot(longer))
    assert cache.memory is not None
    assert [e.tokens for e in cache.memory.index.entries.values()] == [longer]
    found = cache.find(first + (9,))  # a fork at the first turn: the longer one serves it
    assert found is not None and found.common == len(first)


def test_memory_keeps_to_its_budget_least_recently_used_first() -> None:
    size = len(_snapshot(_conversation(0, 1)).state)
    cache = _cache(None, memory=3 * size)
    for n in range(5):
        cache.keep(_snapshot(_conversation(n, 1)))
        cache.find(_conversation(0, 1))  # conversation 0 stays in use
    assert cache.memory is not None and cache.memory.index.bytes <= 3 * size
    kept = {e.tokens for e in cache.memory.index.entries.values()}
    assert kept == {_conversation(0, 1), _conversation(3, 1), _conversation(4, 1)}
    cache.keep(_snapshot(SYSTEM + tuple(range(4 * size))))  # larger than the budget
    assert len(cache.memory.index.entries) == 3


def test_a_new_process_finds_what_an_earlier_one_left_on_disk(tmp_path: Path) -> None:
    first = _cache(tmp_path, memory=0)
    tokens = _conversation(1, 4)
    first.keep(_snapshot(tokens))
    first.flush()
    later = _cache(tmp_path)  # nothing in its memory
    found = later.find(tokens + (1, 2, 3))
    assert found is not None and found.tier == "disk" and found.snapshot == _snapshot(tokens)
    assert later.find(tokens + (1, 2, 3)).tier == "memory"  # type: ignore[union-attr]
    stats = later.stats()
    assert stats["tiers"]["disk"]["snapshots"] == 1 and stats["found"]["disk"] == 1


def test_disk_keeps_to_its_budget_and_is_cleared(tmp_path: Path) -> None:
    one = len(_snapshot(_conversation(5, 2)).to_bytes())  # the largest of those kept
    cache = _cache(tmp_path, memory=0, disk=2 * one + 100)
    for n in range(6):
        cache.keep(_snapshot(_conversation(n, 2)))
    cache.flush()
    assert cache.disk is not None
    count, used = cache.disk.usage()
    assert count == 2 and used <= 2 * one + 100
    on_disk = sum(p.stat().st_size for p in cache.disk.folder.iterdir())
    assert on_disk <= 2 * one + 100
    [folder] = kv_tiers.usage(tmp_path)
    assert (folder.snapshots, folder.model) == (2, MODEL.model)
    assert kv_tiers.clear(tmp_path) == 2 and kv_tiers.usage(tmp_path)[0].snapshots == 0


def test_damaged_snapshots_are_ignored_and_removed(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    writer = _cache(tmp_path, memory=0)
    tokens = _conversation(1, 2)
    writer.keep(_snapshot(tokens))
    writer.flush()
    assert writer.disk is not None
    [path] = list(writer.disk.folder.iterdir())
    data = path.read_bytes()
    for damaged in (data[: len(data) - 5], data[:-8] + b"XXXXXXXX", b"not a snapshot at all"):
        path.write_bytes(damaged)
        with caplog.at_level(logging.WARNING, logger="threadline.kv"):
            assert _cache(tmp_path).find(tokens + (1,)) is None
        assert not path.exists() and "is not used" in caplog.text
        caplog.clear()
        path.write_bytes(data)  # put it back for the next kind of damage
    with pytest.raises(DamagedSnapshot):
        from_bytes(data[:20])


def test_another_models_snapshots_are_never_used(tmp_path: Path) -> None:
    mine = _cache(tmp_path, memory=0)
    tokens = _conversation(1, 2)
    mine.keep(_snapshot(tokens))
    mine.flush()
    assert _cache(tmp_path, identity=OTHER).find(tokens + (1,)) is None
    # a file of the other model's, copied into this model's folder, is refused by its header
    other = _cache(tmp_path / "o", memory=0, identity=OTHER)
    other.keep(_snapshot(tokens, OTHER))
    other.flush()
    assert other.disk is not None and mine.disk is not None
    [foreign] = list(other.disk.folder.iterdir())
    [own] = list(mine.disk.folder.iterdir())
    own.write_bytes(foreign.read_bytes())
    assert _cache(tmp_path).find(tokens + (1,)) is None


def test_a_disk_that_cannot_be_written_never_fails_a_keep(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    read_only = tmp_path / "ro"
    read_only.mkdir()
    cache = _cache(read_only, memory=0)
    assert cache.disk is not None
    cache.disk.folder.mkdir()
    os.chmod(cache.disk.folder, 0o500)
    try:
        with caplog.at_level(logging.WARNING, logger="threadline.kv"):
            cache.keep(_snapshot(_conversation(1, 2)))
            cache.flush()
        if os.geteuid() != 0:  # root writes anyway; the full-disk case below covers it
            assert "cannot write" in caplog.text
    finally:
        os.chmod(cache.disk.folder, 0o700)

    def full(self: Path, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    full_disk = _cache(tmp_path / "full", memory=0)
    with caplog.at_level(logging.WARNING, logger="threadline.kv"):
        full_disk.keep(_snapshot(_conversation(2, 2)))
        full_disk.flush()
    assert "No space left on device" in caplog.text
    assert full_disk.find(_conversation(2, 2) + (1,)) is None
    assert not [p for p in (tmp_path / "full").rglob("*") if p.is_file()]  # no debris


def test_two_writers_of_the_same_key_leave_one_whole_file(tmp_path: Path) -> None:
    tokens = _conversation(1, 3)
    writers = [_cache(tmp_path, memory=0) for _ in range(4)]
    threads = [threading.Thread(target=lambda w=w: [w.keep(_snapshot(tokens)), w.flush()])
               for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert writers[0].disk is not None
    files = list(writers[0].disk.folder.iterdir())
    assert len(files) == 1 and from_bytes(files[0].read_bytes()) == _snapshot(tokens)
