"""What a request costs under a provider's prompt-cache rules.

Profiles live in ``profiles.toml`` next to this module; :func:`profile` looks one up by name.
A request of ``prompt_tokens`` whose first ``reusable_tokens`` match what the provider holds in
its cache is billed as: the cacheable part of the match at the read rate, the rest at the write
rate when the request is long enough to be cached (list price otherwise), all of it at the
long-context multiple when the request passes that threshold. A request whose provider
reported how its input split (read, written, neither) is billed from that report instead
(:meth:`CacheProfile.bill_usage`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from threadline.errors import InputError


@dataclass(frozen=True)
class CacheProfile:
    name: str
    caching: bool = True
    read: float = 1.0
    write: float = 1.0
    min_prefix_tokens: int = 0
    granularity: int = 1
    ttl_seconds: float | None = None
    breakpoints: int | None = None
    lookback_blocks: int | None = None
    long_context_tokens: int | None = None
    long_context_multiplier: float = 1.0
    min_prefix_by_model: Mapping[str, int] = field(default_factory=dict)

    def min_prefix(self, model: str | None = None) -> int:
        if model is not None:
            for prefix, tokens in self.min_prefix_by_model.items():
                if model.startswith(prefix):
                    return tokens
        return self.min_prefix_tokens

    def cacheable(self, prefix_tokens: int, model: str | None = None) -> int:
        """How many tokens of a matching prefix the provider serves from its cache."""
        minimum = self.min_prefix(model)
        if not self.caching or prefix_tokens <= 0 or prefix_tokens < minimum:
            return 0
        return minimum + (prefix_tokens - minimum) // self.granularity * self.granularity

    def bill(self, prompt_tokens: int, reusable_tokens: int, input_price: float, *,
             model: str | None = None) -> Bill:
        """The cost of one request, ``input_price`` in USD per million input tokens."""
        read, written, cached_at_all, cost = self._bill(prompt_tokens, reusable_tokens,
                                                        input_price, model)
        return Bill(prompt_tokens=prompt_tokens, read_tokens=read,
                    written_tokens=written if cached_at_all else 0,
                    uncached_tokens=0 if cached_at_all else written, cost_usd=cost)

    def cost(self, prompt_tokens: int, reusable_tokens: int, input_price: float) -> float:
        """``bill(...).cost_usd``, without building the bill (an export prices every call)."""
        return self._bill(prompt_tokens, reusable_tokens, input_price, None)[3]

    def _bill(self, prompt_tokens: int, reusable_tokens: int, input_price: float,
              model: str | None) -> tuple[int, int, bool, float]:
        read = self.cacheable(min(reusable_tokens, prompt_tokens), model)
        written = prompt_tokens - read
        cached_at_all = self.caching and prompt_tokens >= self.min_prefix(model)
        write_rate = self.write if cached_at_all else 1.0
        multiplier = self.long_context_multiplier if (
            self.long_context_tokens is not None and prompt_tokens > self.long_context_tokens
        ) else 1.0
        cost = (read * self.read + written * write_rate) * input_price * multiplier / 1e6
        return read, written, cached_at_all, cost

    def bill_usage(self, uncached_tokens: int, read_tokens: int, written_tokens: int,
                   input_price: float) -> Bill:
        """The cost of a request whose provider said how its input split: tokens at list
        price, read from the cache, and written to it (Anthropic's ``input_tokens``,
        ``cache_read_input_tokens`` and ``cache_creation_input_tokens``)."""
        prompt_tokens = uncached_tokens + read_tokens + written_tokens
        multiplier = self.long_context_multiplier if (
            self.long_context_tokens is not None and prompt_tokens > self.long_context_tokens
        ) else 1.0
        read_rate, write_rate = (self.read, self.write) if self.caching else (1.0, 1.0)
        cost = (uncached_tokens + read_tokens * read_rate + written_tokens * write_rate) \
            * input_price * multiplier / 1e6
        return Bill(prompt_tokens=prompt_tokens, read_tokens=read_tokens,
                    written_tokens=written_tokens, uncached_tokens=uncached_tokens,
                    cost_usd=cost)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "caching": self.caching, "read": self.read,
                "write": self.write, "min_prefix_tokens": self.min_prefix_tokens,
                "granularity": self.granularity, "ttl_seconds": self.ttl_seconds,
                "breakpoints": self.breakpoints, "lookback_blocks": self.lookback_blocks,
                "long_context_tokens": self.long_context_tokens,
                "long_context_multiplier": self.long_context_multiplier,
                "min_prefix_by_model": dict(self.min_prefix_by_model)}


@dataclass(frozen=True)
class Bill:
    prompt_tokens: int
    read_tokens: int       # served from the cache
    written_tokens: int    # billed at the write rate (and cached)
    uncached_tokens: int   # billed at list price (too short to cache, or no caching)
    cost_usd: float

    def to_json(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "read_tokens": self.read_tokens,
                "written_tokens": self.written_tokens, "uncached_tokens": self.uncached_tokens,
                "cost_usd": self.cost_usd}


def reported_split(response: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """(list-price, cache-read, cache-written) input tokens of a call whose response records
    a provider's usage report with both cache fields (the Anthropic backend records them as
    reported); None for any other call."""
    return usage_split(response.get("usage"))


def usage_split(usage: Any) -> tuple[int, int, int] | None:
    """``reported_split`` of a response whose ``usage`` is this."""
    if not isinstance(usage, Mapping):
        return None
    values: list[int] = []
    for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        value = usage.get(name)
        if not isinstance(value, int) or value < 0:
            return None
        values.append(value)
    return values[0], values[1], values[2]


@cache
def profiles() -> dict[str, CacheProfile]:
    """Every profile in ``profiles.toml``, by name."""
    text = resources.files("threadline.cache").joinpath("profiles.toml").read_text("utf-8")
    return {name: CacheProfile(name=name, **values)
            for name, values in tomllib.loads(text).items()}


def profile(name: str) -> CacheProfile:
    try:
        return profiles()[name]
    except KeyError:
        raise InputError(f"unknown cache profile {name!r}; choose one of: "
                         f"{', '.join(profiles())}") from None
