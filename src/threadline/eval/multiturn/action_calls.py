"""Actions: the function calls of a reply, parsed by Python's own parser, and BFCL's match of
them against the reference calls.

A reply answers with ``[func(a=1, b="x"), other.func(c=[1, 2])]`` (or one bare call), perhaps
in a code fence. The calls are read from the syntax tree (``ast``), never evaluated: a value
is a literal (numbers, strings, lists, dicts, tuples, booleans, None, a negative number), a
name (read as its text) or a nested call (read as its source).

The reference is BFCL's "possible answer": for each expected call, each parameter's list of
accepted values, where ``""`` means the parameter may be left out. A call matches when it
names the function, passes no parameter the function does not declare, passes every required
one, each of the declared type (an integer where a float is declared is accepted), and each
value is one of the accepted ones: strings compared without case, spaces or the punctuation
``,./-_*^``, lists element by element, dicts key by key. ``parallel`` tasks expect every call
once in any order; ``simple`` exactly one; ``multiple`` one call of several functions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from threadline.eval.multiturn.grades import (
    ANSWER_ATTEMPT,
    CLARIFICATION,
    DISCUSSION,
    Grade,
)

Call = tuple[str, dict[str, Any]]
_FENCE = re.compile(r"```[a-zA-Z_]*\s*(.*?)```", re.S)
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "float": (float, int), "number": (float, int),
    "boolean": (bool,), "array": (list, tuple), "tuple": (list, tuple), "dict": (dict,),
    "object": (dict,), "any": (object,),
}
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")


class NotCalls(ValueError):
    """The text is not a list of function calls."""


def parse_calls(text: str) -> list[Call]:
    """The calls ``text`` writes, or NotCalls."""
    body = text.strip()
    fenced = _FENCE.findall(body)
    if fenced:
        body = fenced[-1].strip()
    body = body.strip("`").strip()
    if body.startswith("tool_code"):
        body = body[len("tool_code"):].strip()
    body = body.replace("\n", " ")
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError:
        start, end = body.find("["), body.rfind("]")
        if start < 0 or end < start:
            raise NotCalls("no list of calls found") from None
        try:
            tree = ast.parse(body[start:end + 1], mode="eval").body
        except SyntaxError as err:
            raise NotCalls(f"not Python call syntax ({err.msg})") from None
    nodes = [tree] if isinstance(tree, ast.Call) else list(getattr(tree, "elts", []))
    if not nodes or not isinstance(tree, (ast.Call, ast.List, ast.Tuple)) \
            or not all(isinstance(node, ast.Call) for node in nodes):
        raise NotCalls("not a list of function calls")
    return [_call(node) for node in nodes if isinstance(node, ast.Call)]


def _call(node: ast.Call) -> Call:
    name = _dotted(node.func)
    if name is None:
        raise NotCalls("a call whose function is not a name")
    if node.args:
        raise NotCalls(f"{name}() passes positional arguments; every parameter must be named")
    return name, {str(k.arg): _value(k.value) for k in node.keywords if k.arg is not None}


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return {_value(k) if k is not None else "**": _value(v)
                for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and node.keywords:
        return dict([_call(node)])
    return ast.unparse(node)  # an expression: compared as its text


def _standard(text: str) -> str:
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _same(value: Any, accepted: Any) -> bool:
    if isinstance(accepted, str):
        return isinstance(value, str) and _standard(value) == _standard(accepted)
    if isinstance(accepted, bool) or isinstance(value, bool):
        return value is accepted
    if isinstance(accepted, (int, float)):
        return isinstance(value, (int, float)) and float(value) == float(accepted)
    if isinstance(accepted, (list, tuple)):
        return isinstance(value, (list, tuple)) and len(value) == len(accepted) and all(
            _same(v, a) for v, a in zip(value, accepted, strict=True))
    if isinstance(accepted, dict):
        return isinstance(value, dict) and _dict_matches(value, accepted)
    return bool(value == accepted)


def _dict_matches(value: Mapping[str, Any], accepted: Mapping[str, Any]) -> bool:
    """A dict argument: its keys among the accepted ones, each value accepted (a list of
    accepted values per key, as BFCL writes them), and no key without ``""`` left out."""
    for key, options in accepted.items():
        options = options if isinstance(options, list) else [options]
        if key not in value:
            if "" not in options:
                return False
        elif not any(_same(value[key], option) for option in options if option != ""):
            return False
    return all(key in accepted for key in value)


def _declared(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((f for f in functions if f.get("name") == name), None)


def check_call(call: Call, expected: Mapping[str, Any],
               functions: Sequence[Mapping[str, Any]]) -> str | None:
    """Why ``call`` does not match one expected call (``{name: {param: [accepted]}}``), or
    None when it does."""
    (want, accepted), = expected.items()
    name, arguments = call
    if name != want:
        return f"called {name}, expected {want}"
    declared = _declared(functions, want) or {}
    parameters = declared.get("parameters", {})
    properties: Mapping[str, Any] = parameters.get("properties", {})
    for param in parameters.get("required", ()):
        if param not in arguments:
            return f"{name}: required parameter {param!r} missing"
    for param, value in arguments.items():
        if properties and param not in properties:
            return f"{name}: unexpected parameter {param!r}"
        declared_type = str(properties.get(param, {}).get("type", "any"))
        types = _TYPES.get(declared_type, (object,))
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"{name}: {param!r} should be {declared_type}, got {type(value).__name__}"
        options = accepted.get(param)
        if options is None:
            return f"{name}: parameter {param!r} is not in the reference"
        if not any(_same(value, option) for option in options if option != ""):
            return f"{name}: {param}={value!r} is not one of {options!r}"
    for param, options in accepted.items():
        if param not in arguments and "" not in options:
            return f"{name}: parameter {param!r} missing"
    return None


def check_calls(calls: Sequence[Call], reference: Sequence[Mapping[str, Any]],
                functions: Sequence[Mapping[str, Any]], category: str) -> str | None:
    """Why ``calls`` do not answer the reference, or None when they do."""
    if "parallel" not in category and "multiple" not in category and len(calls) != 1:
        return f"expected one call, got {len(calls)}"
    if len(calls) != len(reference):
        return f"expected {len(reference)} calls, got {len(calls)}"
    unmatched = list(range(len(calls)))
    for expected in reference:  # each expected call once, in any order (BFCL's greedy match)
        reasons = []
        for index in unmatched:
            reason = check_call(calls[index], expected, functions)
            if reason is None:
                unmatched.remove(index)
                break
            reasons.append(reason)
        else:
            return reasons[0] if len(reasons) == 1 else \
                f"no call matches {next(iter(expected))}: {reasons[0]}"
    return None


def extract(text: str) -> str | None:
    """The calls of a reply, written back canonically, or None."""
    try:
        calls = parse_calls(text)
    except NotCalls:
        return None
    return "[" + ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
                           for name, args in calls) + "]"


def classify(text: str) -> str:
    return ANSWER_ATTEMPT if extract(text) is not None else _no_calls(text)


def _no_calls(text: str) -> str:
    return CLARIFICATION if "?" in text else DISCUSSION


def grade(text: str, reference: Mapping[str, Any]) -> Grade:
    try:
        calls = parse_calls(text)
    except NotCalls:
        return Grade(_no_calls(text))
    return grade_calls(calls, reference)


def grade_calls(calls: Sequence[Call], reference: Mapping[str, Any]) -> Grade:
    answer = "[" + ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
                             for name, args in calls) + "]"
    reason = check_calls(calls, reference["calls"], reference["functions"],
                         reference.get("category", "parallel"))
    return Grade(ANSWER_ATTEMPT, answer, reason is None, reason or "")
