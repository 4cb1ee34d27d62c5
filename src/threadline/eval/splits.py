"""Which benchmark data the rewrite hop may be developed on, and which is held out.

The split was fixed before the rewriter was tuned on conversational search, and every rewrite
evaluation prints the split it ran on, so a figure always says whether the method saw the data:

- **dev**: CANARD's dev file, the CAsT 2019 topics, and since 2026-12-06 the dev half of the
  CAsT 2020 topics. The rules were looked at and tuned here: failures read, rules changed,
  figures compared.
- **test**: the other half of the CAsT 2020 topics, held out. They are run only to report a
  figure; their failures are never read to change a rule.

The 2020 topics were held out whole until their figure had stopped moving with changes tuned on
2019 (0.26 against the organisers' T5 rewrites' 0.35), which said the two years fail
differently. They were then halved by a hash of the topic number (``cast_2020_half``), fixed
before any 2020 turn was read: 10 topics (89 turns) to dev, 15 (127) held out.

A file outside both (a user's own, or a fixture) is reported as ``unsplit``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Split:
    name: str          # "dev", "test" or "unsplit"
    tuned_on: bool     # whether the method was developed on this data
    what: str          # the data, in words

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "tuned_on": self.tuned_on, "what": self.what}

    def describe(self) -> str:
        role = ("the rewriter was developed and tuned on it" if self.tuned_on
                else "held out: never used to develop the rewriter" if self.name == "test"
                else "not part of the fixed split")
        return f"split: {self.name} ({self.what}; {role})"


DEV_CANARD = Split("dev", True, "CANARD dev")
DEV_CAST = Split("dev", True, "TREC CAsT 2019")
DEV_CAST_2020 = Split("dev", True, "TREC CAsT 2020, dev half")
TEST_CAST = Split("test", False, "TREC CAsT 2020, test half")
BOTH_CAST_2020 = Split("mixed", True, "TREC CAsT 2020, both halves; the dev half was tuned on")
UNSPLIT = Split("unsplit", False, "a file outside the fixed split")

HALVES = ("test", "dev", "all")
CAST_SPLITS = {2019: DEV_CAST, 2020: TEST_CAST}
CAST_2020_SPLITS = {"dev": DEV_CAST_2020, "test": TEST_CAST, "all": BOTH_CAST_2020}


def cast_2020_half(topic: int) -> str:
    """"dev" or "test": the half of the CAsT 2020 topics ``topic`` (its number) is in."""
    digest = hashlib.sha256(f"cast-2020-topic:{topic}".encode()).digest()
    return "dev" if digest[0] % 2 == 0 else "test"


def canard_split(path: Path) -> Split:
    """CANARD's dev file is dev; anything else (CANARD's train or test, other files) is not
    part of the split the rewriter was developed on."""
    return DEV_CANARD if path.stem.casefold() == "dev" else UNSPLIT
