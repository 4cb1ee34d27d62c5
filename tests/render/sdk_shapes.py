"""A strict structural check of a payload against the official SDKs' TypedDict param types:
every key must be one the type declares, every required key present, every literal allowed.
(pydantic validates these types lazily and ignores unknown keys, so it would let typos by.)"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import typing_extensions
from typing_extensions import is_typeddict

_ITERABLES = {list, collections.abc.Iterable, collections.abc.Sequence, typing.Iterable,
              typing.Sequence, list}


def problems(value: Any, hint: Any, path: str = "$") -> list[str]:
    origin = get_origin(hint)
    if hint is Any or hint is object:
        return []
    if origin in (typing.Required, typing.NotRequired, typing.Annotated,
                  typing_extensions.Required, typing_extensions.NotRequired,
                  typing_extensions.Annotated):
        return problems(value, get_args(hint)[0], path)
    if origin in (Union, types.UnionType):
        options = [problems(value, option, path) for option in get_args(hint)]
        return [] if any(not p for p in options) else min(options, key=len)
    if origin in (Literal, typing_extensions.Literal):
        return [] if value in get_args(hint) else [f"{path}: {value!r} not in {get_args(hint)}"]
    if hint is type(None):
        return [] if value is None else [f"{path}: expected None"]
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {hint.__name__}"]
        hints = typing_extensions.get_type_hints(hint, include_extras=True)
        found = [f"{path}.{key}: not a field of {hint.__name__}" for key in value
                 if key not in hints]
        found += [f"{path}.{key}: required by {hint.__name__}" for key in hint.__required_keys__
                  if key not in value]
        for key, item in value.items():
            if key in hints:
                found += problems(item, hints[key], f"{path}.{key}")
        return found
    if origin in _ITERABLES:
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        (item_hint,) = get_args(hint) or (Any,)
        return [p for i, item in enumerate(value) for p in problems(item, item_hint,
                                                                     f"{path}[{i}]")]
    if origin in (dict, collections.abc.Mapping, dict):
        return [] if isinstance(value, dict) else [f"{path}: expected an object"]
    if isinstance(hint, type):
        if hint is float and isinstance(value, int):
            return []
        return [] if isinstance(value, hint) else [f"{path}: expected {hint.__name__}"]
    return []  # anything more exotic: trust the SDK
