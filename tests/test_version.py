"""The version is written once, in ``threadline/version.py`` (``threadline.__version__``);
the package metadata, the CLI and the server read it from there (the wheel's own metadata is
checked in test_packaging.py)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from click.testing import CliRunner

import threadline
from threadline.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "threadline.version.__version__"}


def test_metadata_the_package_and_the_cli_agree() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", threadline.__version__)
    assert metadata.version("threadline") == threadline.__version__
    run = CliRunner().invoke(cli, ["--version"])
    assert run.exit_code == 0
    assert run.stdout == f"threadline, version {threadline.__version__}\n"


def test_the_version_is_written_in_one_place() -> None:
    """No other source file spells the version out."""
    written = [path.relative_to(ROOT).as_posix()
               for path in sorted((ROOT / "src").rglob("*.py"))
               if threadline.__version__ in path.read_text("utf-8")]
    assert written == ["src/threadline/version.py"]
