"""The packages of threadline import only downwards, and no modules import each other in a
circle. The order is written in docs/architecture.md ("Layers"); this test holds the code to
it, and the doc to the test."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "threadline"

# lowest first; a unit (a subpackage or a top-level module) imports only from lower layers
LAYERS = [
    ["errors", "logistic", "sequences", "trust", "version"],
    ["items"],
    ["settings", "request"],
    ["calls"],
    ["render"],
    ["models"],
    ["stores"],
    ["cache"],
    ["plugin"],
    ["rewrite", "compaction"],
    ["retrieval"],
    ["memory"],
    ["turn"],
    ["providers", "hooks", "interop", "metrics", "replay", "stats", "audit", "tracing"],
    ["engine"],
    ["standard"],
    ["server"],
    ["inspector"],
    ["eval"],
    ["cli"],
    ["__init__", "__main__"],
]
FEATURES = {"memory", "retrieval", "rewrite", "compaction", "providers", "hooks", "eval",
            "metrics", "replay", "stats", "audit", "tracing"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The threadline modules ``path`` imports, anywhere in it."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] == "threadline"}


def _graph() -> dict[str, set[str]]:
    files = {_module(path): path for path in SOURCE.rglob("*.py")}
    return {name: {imported for imported in _imports(path) if imported in files
                   and imported != name} for name, path in files.items()}


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    unit = parts[1]
    return unit


def test_every_unit_has_a_layer() -> None:
    units = {_unit(module) for module in _graph()}
    placed = [unit for layer in LAYERS for unit in layer]
    assert len(placed) == len(set(placed))
    assert units == set(placed), "add new packages to LAYERS and to docs/architecture.md"


def test_imports_only_point_down() -> None:
    rank = {unit: n for n, layer in enumerate(LAYERS) for unit in layer}
    upward = sorted(f"{module} imports {imported}"
                    for module, imports in _graph().items() for imported in imports
                    if _unit(imported) != _unit(module)
                    and rank[_unit(imported)] >= rank[_unit(module)])
    assert upward == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = _graph()
    # a package's __init__ re-exporting its modules is not a dependency of those modules
    edges = {module: {i for i in imports if not module.startswith(i + ".")}
             for module, imports in graph.items()}
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the path, 2 done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(edges[module]):
            if state[imported] == 1:
                cycles.append(path[path.index(imported):] + [imported])
            elif state[imported] == 0:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(edges):
        if state[module] == 0:
            visit(module, [module])
    assert cycles == []


def test_the_engine_imports_no_feature() -> None:
    imported = {_unit(name) for name in _graph()["threadline.engine"]}
    assert imported & FEATURES == set()


def test_the_layers_in_the_docs_are_these() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    written = doc.split("<!-- layers -->", 2)[1]
    lines = [line.strip() for line in written.strip().strip("`").splitlines() if line.strip()]
    assert lines == [" · ".join(layer) for layer in reversed(LAYERS)]


def test_the_graph_is_read_from_real_imports() -> None:
    graph = _graph()  # a parser that saw nothing would pass every test above
    assert "threadline.turn.assemble" in graph["threadline.engine"]
    assert "threadline.items" in graph["threadline.request"]
    assert len(graph) > 100 and sum(len(i) for i in graph.values()) > 400


SQL = re.compile(r"\b(?:SELECT\s.+\sFROM|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|"
                 r"CREATE\s+(?:TABLE|INDEX|TRIGGER|VIRTUAL))\b", re.IGNORECASE | re.DOTALL)
STORE_CLASSES = {"SQLiteStore", "PostgresStore", "RelationalStore"}


def _outside_stores() -> list[Path]:
    return [path for path in SOURCE.rglob("*.py")
            if path.relative_to(SOURCE).parts[0] != "stores"]


def test_no_sql_outside_the_stores() -> None:
    found = []
    for path in _outside_stores():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and SQL.search(node.value):
                found.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert found == [], "SQL belongs under stores/, behind a protocol"
    assert SQL.search("SELECT id FROM memory_entries WHERE user_id = ?")  # the check sees SQL


def test_no_isinstance_on_a_store_class_outside_the_stores() -> None:
    found = []
    for path in _outside_stores():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" \
                    and len(node.args) == 2 and STORE_CLASSES & {
                        n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}:
                found.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert found == [], "ask the Store protocol (store.memory, store.corpora) instead"
