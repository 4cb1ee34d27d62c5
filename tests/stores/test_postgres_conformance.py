import pytest

from threadline.stores.conformance import MakeStore, StoreConformance
from threadline.stores.corpus_conformance import CorpusConformance
from threadline.stores.memory_conformance import MemoryConformance
from threadline.stores.tokens_conformance import TokenConformance
from threadline.stores.transcript_conformance import TranscriptConformance


class TestPostgresStore(StoreConformance, MemoryConformance, CorpusConformance, TokenConformance,
                        TranscriptConformance):
    @pytest.fixture
    def make_store(self, postgres_url: str) -> MakeStore:
        from threadline.stores.postgres import PostgresStore

        return lambda: PostgresStore(postgres_url, max_connections=4)
