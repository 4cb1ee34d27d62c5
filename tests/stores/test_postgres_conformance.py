import pytest

from threadline.stores.conformance import MakeStore, StoreConformance


class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def make_store(self, postgres_url: str) -> MakeStore:
        from threadline.stores.postgres import PostgresStore

        return lambda: PostgresStore(postgres_url, max_connections=4)
