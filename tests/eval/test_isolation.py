"""The runtime never imports the offline evaluators: only ``eval/`` itself and the CLI may."""

from __future__ import annotations

import ast
from pathlib import Path

import threadline

PACKAGE = Path(threadline.__file__).parent
ALLOWED = ("eval", "cli")


def _module_name(path: Path) -> str:
    parts = ("threadline", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_eval(name: str) -> bool:
    return name == "threadline.eval" or name.startswith("threadline.eval.")


def eval_imports(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """The imports of ``threadline.eval`` (or anything in it) that ``source`` makes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _is_eval(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module's package
                package = module.split(".")
                package = package if is_package else package[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            found += [t for t in targets if _is_eval(t)][:1]
    return found


def test_the_detector_sees_every_form_of_import() -> None:
    assert eval_imports("import threadline.eval.replay", "threadline.engine") == [
        "threadline.eval.replay"]
    assert eval_imports("from threadline.eval.files import read_records",
                        "threadline.turn.call") == ["threadline.eval.files"]
    assert eval_imports("from threadline import eval", "threadline.engine") == [
        "threadline.eval"]
    assert eval_imports("from ..eval import locomo", "threadline.memory.recall") == [
        "threadline.eval"]
    assert eval_imports("from . import replay", "threadline.eval", is_package=True) == [
        "threadline.eval"]
    assert eval_imports("from threadline.evaluation import x\nimport threadline.cache",
                        "threadline.engine") == []


def test_only_eval_and_the_cli_import_the_evaluators() -> None:
    offenders = []
    checked = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in ALLOWED:
            continue
        checked += 1
        module = _module_name(path)
        for name in eval_imports(path.read_text("utf-8"), module,
                                 is_package=path.name == "__init__.py"):
            offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert checked > 50  # the walk really covered the runtime
    assert offenders == []


def test_the_cli_is_what_reaches_the_evaluators() -> None:
    """The allowance is not idle: the CLI does import them (so the check above means something)."""
    cli = PACKAGE / "cli"
    users = {path.name for path in cli.glob("*.py")
             if eval_imports(path.read_text("utf-8"), _module_name(path))}
    assert {"cost.py", "evaluate.py", "rewrite_eval.py"} <= users
