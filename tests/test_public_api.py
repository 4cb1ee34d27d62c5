from __future__ import annotations

from pathlib import Path

import threadline
from threadline.cli._reference import render

ROOT = Path(__file__).resolve().parents[1]


def test_the_public_api_is_exactly_what_all_lists() -> None:
    public = {name for name in dir(threadline) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(threadline, name)).__name__ == "module"}
    assert sorted(public - modules) == sorted(set(threadline.__all__) - {"__version__"})
    for name in threadline.__all__:
        assert hasattr(threadline, name), name


def test_the_cli_reference_is_up_to_date() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == render(), "run scripts/cli-docs"


def test_the_readme_quick_start_has_exactly_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    commands = [line for line in block.splitlines()[1:] if line.strip()
                and not line.lstrip().startswith("#")]
    assert len(commands) == 2, commands
    assert "scripts/chat" in commands[0] and "scripts/test" in commands[1]
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec ./scripts/test")
