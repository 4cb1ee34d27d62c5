"""The wheel carries every file the code reads at run time: a wheel without the PostgreSQL
migrations installs fine and then fails at ``threadline db migrate``.

The wheel is built from a copy of the tree (so the build leaves nothing in it), unpacked into a
temporary directory, and imported from there in a subprocess, ahead of the editable install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "threadline"
MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-q", "-w", str(out), str(tree)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    (built,) = out.glob("threadline-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def _source_migrations(backend: str) -> list[list[object]]:
    folder = PACKAGE / "stores" / backend / "migrations"
    found = []
    for path in folder.iterdir():
        match = MIGRATION.match(path.name)
        if match:
            found.append([int(match[1]), match[2], path.read_text("utf-8")])
    return sorted(found, key=lambda m: int(str(m[0])))


def test_the_installed_wheel_loads_both_migration_folders(installed: Path) -> None:
    script = textwrap.dedent("""
        import json
        import threadline
        from threadline.cache.pricing import profiles
        from threadline.stores.postgres.schema import migrations as postgres
        from threadline.stores.sqlite.schema import migrations as sqlite

        print(json.dumps({
            "file": threadline.__file__,
            "sqlite": [[m.version, m.name, m.sql] for m in sqlite()],
            "postgres": [[m.version, m.name, m.sql] for m in postgres()],
            "profiles": sorted(profiles()),
        }))
    """)
    env = {**os.environ, "PYTHONPATH": str(installed)}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=installed, timeout=120)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert Path(loaded["file"]).resolve().is_relative_to(installed.resolve())
    for backend in ("sqlite", "postgres"):
        expected = _source_migrations(backend)
        assert expected  # the source tree really has some
        assert loaded[backend] == expected, backend
    assert loaded["profiles"]


def test_the_wheel_holds_every_data_file_of_the_package(wheel: Path) -> None:
    """Not only the migrations: any file beside the code (TOML, SQL, py.typed) ships."""
    data = {path.relative_to(PACKAGE.parent).as_posix() for path in PACKAGE.rglob("*")
            if path.is_file() and path.suffix not in (".py", ".pyc")
            and "__pycache__" not in path.parts}
    assert "threadline/py.typed" in data
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    assert sorted(data - shipped) == []


def test_the_installed_metadata_carries_the_package_version(installed: Path) -> None:
    script = ("import threadline, importlib.metadata as m; "
              "print(threadline.__file__, threadline.__version__, m.version('threadline'))")
    env = {**os.environ, "PYTHONPATH": str(installed)}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=installed, timeout=120)
    assert run.returncode == 0, run.stderr
    where, version, recorded = run.stdout.split()
    assert Path(where).resolve().is_relative_to(installed.resolve())
    assert recorded == version == _source_version()
    cli = subprocess.run([sys.executable, "-m", "threadline", "--version"], capture_output=True,
                         text=True, env=env, cwd=installed, timeout=120)
    assert cli.stdout == f"threadline, version {version}\n"


def _source_version() -> str:
    match = re.search(r'^__version__ = "([^"]+)"$', (PACKAGE / "version.py").read_text("utf-8"),
                      re.MULTILINE)
    assert match
    return match[1]
