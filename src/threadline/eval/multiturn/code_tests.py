"""Code: the function a reply writes, run against the task's own tests in a sandbox.

The function is the last top-level ``def`` of the last fenced Python block that has one (or
of the reply itself when it has no fence), with the imports that block makes. It is renamed
to the task's entry point, the imports of the task's own prompt go above it, and HumanEval's
``check(candidate)`` runs it.

The sandbox is a separate Python process (``python -I``: no user site, no PYTHON*
variables) in a fresh temporary directory, which is its working directory and its HOME,
with a wall-clock limit, a CPU-time limit and an address-space limit. The network: where
``unshare -n`` can make a new network namespace (root, or unprivileged user namespaces),
the process runs in one that has no interface but loopback (``isolation = "netns"``);
otherwise every socket the program opens is refused by a guard installed before the test
runs (``isolation = "socket-guard"``), which stops Python code but not a C extension that
opens its own sockets. The run records which one it had.
"""

from __future__ import annotations

import ast
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from threadline.eval.multiturn.grades import (
    ANSWER_ATTEMPT,
    CLARIFICATION,
    DISCUSSION,
    Grade,
)

TIME_LIMIT_S = 6.0
MEMORY_BYTES = 1024 * 2**20
_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
_SOCKET_GUARD = '''
import socket as _socket
def _refused(*args, **kwargs):
    raise OSError("network access is disabled in the grading sandbox")
_socket.socket = _refused
_socket.create_connection = _refused
_socket.socketpair = _refused
'''


def extract(text: str) -> str | None:
    """The reply's function (with its block's imports), or None."""
    blocks = _BLOCK.findall(text)
    for block in reversed(blocks) if blocks else [_from_def(text)]:
        found = _function(block)
        if found is not None:
            return found
    return None


def _from_def(text: str) -> str:
    start = min((i for i in (text.find("import "), text.find("from "), text.find("def "))
                 if i >= 0), default=-1)
    return text[start:] if start >= 0 else ""


def _function(code: str) -> str | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if not functions:
        return None
    imports = [ast.unparse(node) for node in tree.body
               if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join([*imports, ast.unparse(functions[-1])])


def classify(text: str) -> str:
    if extract(text) is not None:
        return ANSWER_ATTEMPT
    return CLARIFICATION if text.rstrip().endswith("?") else DISCUSSION


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str


def program(function: str, prompt: str, test: str, entry_point: str) -> str:
    """The test program: the prompt's imports, the function under the entry point's name,
    the task's tests, and the call that runs them."""
    tree = ast.parse(function)
    defined = [node for node in tree.body if isinstance(node, ast.FunctionDef)][-1]
    defined.name = entry_point
    try:
        prompt_imports = [ast.unparse(node) for node in ast.parse(prompt).body
                          if isinstance(node, (ast.Import, ast.ImportFrom))]
    except SyntaxError:
        prompt_imports = []
    return "\n\n".join([*prompt_imports, ast.unparse(tree), test,
                        f"check({entry_point})", 'print("all tests passed")'])


@cache
def isolation() -> str:
    """How the sandbox keeps the program off the network here: ``netns`` or
    ``socket-guard`` (see the module's docstring)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "socket-guard"
    try:
        done = subprocess.run([unshare, "-n", sys.executable, "-c", "pass"],
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "socket-guard"
    return "netns" if done.returncode == 0 else "socket-guard"


def _limits() -> None:  # in the child, before it runs the program
    cpu = int(TIME_LIMIT_S) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_tests(source: str, *, time_limit_s: float = TIME_LIMIT_S) -> Outcome:
    """Run ``source`` in the sandbox: passed when it exits 0 within the limits."""
    how = isolation()
    with tempfile.TemporaryDirectory(prefix="threadline-grade-") as scratch:
        path = Path(scratch) / "program.py"
        path.write_text((_SOCKET_GUARD if how == "socket-guard" else "") + source, "utf-8")
        command = [sys.executable, "-I", str(path)]
        if how == "netns":
            command = [shutil.which("unshare") or "unshare", "-n", *command]
        env = {"HOME": scratch, "TMPDIR": scratch, "PATH": os.environ.get("PATH", ""),
               "LANG": "C.UTF-8"}
        try:
            done = subprocess.run(command, cwd=scratch, env=env, capture_output=True,
                                  timeout=time_limit_s, preexec_fn=_limits, check=False,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return Outcome(False, f"timed out after {time_limit_s:g} s")
    if done.returncode == 0:
        return Outcome(True, "")
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return Outcome(False, lines[-1][:300] if lines else f"exit status {done.returncode}")


def grade(text: str, reference: dict[str, str]) -> Grade:
    function = extract(text)
    if function is None:
        return Grade(classify(text))
    source = program(function, reference["prompt"], reference["test"],
                     reference["entry_point"])
    outcome = run_tests(source)
    return Grade(ANSWER_ATTEMPT, function, outcome.passed, outcome.detail)
