"""The tree in ``errors.py``'s docstring is the whole ``ThreadlineError`` hierarchy: every
subclass anywhere in the package is in it, under its real base, with the module it lives in and
its exit status; and every name in it is a real class."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass

import threadline
from threadline import errors
from threadline.errors import ThreadlineError

_BRANCH = re.compile(r"^(?P<indent>[ │]*)[├└]── (?P<name>\w+)(?P<rest>.*)$")
_ROOT = re.compile(r"^ {4}(?P<name>\w+)(?P<rest>.*)$")


@dataclass(frozen=True)
class Entry:
    name: str
    parent: str | None
    module: str
    exit_code: int | None


def documented_tree(doc: str) -> list[Entry]:
    """The entries of the docstring's tree (the literal block after ``::``), in order."""
    block = doc.split("::\n", 1)[1].strip("\n").split("\n\n", 1)[0]
    entries: list[Entry] = []
    path: list[str] = []  # the names from the root down to the current line's parent
    for line in block.splitlines():
        if match := _BRANCH.match(line):
            depth = (len(match["indent"]) - 4) // 4 + 1
        elif match := _ROOT.match(line):
            depth = 0
        else:
            raise AssertionError(f"not a line of the tree: {line!r}")
        del path[depth:]
        module = re.search(r"\[([\w.]+)\]", match["rest"])
        code = re.search(r"\bexit (\d+)\b", match["rest"])
        entries.append(Entry(match["name"], path[-1] if path else None,
                             f"threadline.{module[1] if module else 'errors'}",
                             int(code[1]) if code else None))
        path.append(match["name"])
    return entries


def every_subclass() -> dict[str, type[ThreadlineError]]:
    """Every ``ThreadlineError`` subclass defined anywhere in the package, by name."""
    for info in pkgutil.walk_packages(threadline.__path__, "threadline."):
        if not info.name.endswith("__main__"):  # running it would start the CLI
            importlib.import_module(info.name)
    found: dict[str, type[ThreadlineError]] = {}
    todo: list[type[ThreadlineError]] = [ThreadlineError]
    while todo:
        cls = todo.pop()
        assert found.setdefault(cls.__name__, cls) is cls, f"two classes named {cls.__name__}"
        todo.extend(cls.__subclasses__())
    return found


def test_the_parser_reads_depth_module_and_exit_status() -> None:
    doc = ("x::\n\n    Root                 exit 1\n    ├── A                exit 2\n"
           "    │   └── B            [memory.store]  why\n    └── C\n\nafter\n")
    assert documented_tree(doc) == [
        Entry("Root", None, "threadline.errors", 1), Entry("A", "Root", "threadline.errors", 2),
        Entry("B", "A", "threadline.memory.store", None), Entry("C", "Root", "threadline.errors",
                                                                None)]


def test_every_error_is_in_the_tree_and_every_name_in_it_is_an_error() -> None:
    assert errors.__doc__ is not None
    documented = [entry.name for entry in documented_tree(errors.__doc__)]
    classes = every_subclass()
    assert len(documented) == len(set(documented)), "a name appears twice in the tree"
    assert {"UnknownMemory", "ExtractionFailed", "UnknownGeneration"} <= set(classes)
    assert sorted(set(classes) - set(documented)) == [], "missing from the tree"
    assert sorted(set(documented) - set(classes)) == [], "in the tree but not a class"


def test_the_tree_gives_each_error_its_base_module_and_exit_status() -> None:
    assert errors.__doc__ is not None
    classes = every_subclass()
    for entry in documented_tree(errors.__doc__):
        cls = classes[entry.name]
        bases = [b.__name__ for b in cls.__bases__ if issubclass(b, ThreadlineError)]
        assert bases == ([entry.parent] if entry.parent else []), entry.name
        assert cls.__module__ == entry.module, entry.name
        if entry.exit_code is not None:
            assert cls.exit_code == entry.exit_code, entry.name
