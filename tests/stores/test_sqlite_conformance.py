from pathlib import Path

import pytest

from threadline.stores.conformance import MakeStore, StoreConformance
from threadline.stores.corpus_conformance import CorpusConformance
from threadline.stores.memory_conformance import MemoryConformance
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.tokens_conformance import TokenConformance
from threadline.stores.transcript_conformance import TranscriptConformance


class TestSQLiteStore(StoreConformance, MemoryConformance, CorpusConformance, TokenConformance,
                      TranscriptConformance):
    @pytest.fixture
    def make_store(self, tmp_path: Path) -> MakeStore:
        return lambda: SQLiteStore(tmp_path / "conformance.db")
