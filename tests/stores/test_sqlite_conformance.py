from pathlib import Path

import pytest

from threadline.stores.conformance import MakeStore, StoreConformance
from threadline.stores.sqlite import SQLiteStore


class TestSQLiteStore(StoreConformance):
    @pytest.fixture
    def make_store(self, tmp_path: Path) -> MakeStore:
        return lambda: SQLiteStore(tmp_path / "conformance.db")
