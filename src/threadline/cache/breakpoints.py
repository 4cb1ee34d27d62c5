"""What Anthropic's prompt cache would bill for Messages payloads, from the payloads alone.

The cache works on the prefix in the order the API reads it: tools, then system blocks, then
each message's content blocks. A request reads the longest prefix that an earlier request wrote
and that has not expired, ending at one of its own ``cache_control`` breakpoints or at most
``lookback_blocks`` blocks before one; it writes the prefix up to each of its breakpoints past
that; what follows its last breakpoint is billed at list price. A breakpoint whose prefix is
shorter than the model's minimum caches nothing. An entry lives ``ttl`` from its last use.

:class:`BreakpointCache` replays payloads in order (recorded ones: ``SentRequest.params`` holds
``tools`` and ``system``, ``messages`` the rest) and bills each under a pricing profile. Token
counts come from the tokenizer it is given, over each block's text, so they approximate what
the provider would count; the rules applied are the provider's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from threadline.cache.pricing import Bill, CacheProfile
from threadline.items import canonical_json

_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True)
class Block:
    where: str       # e.g. "tools[1]", "system[0]", "messages[3].content[0]"
    tokens: int      # of this block alone
    marked: bool     # a cache_control breakpoint ends it
    ttl_s: float | None  # the breakpoint's TTL, where it names one
    digest: bytes    # of the prefix up to and including this block


@dataclass(frozen=True)
class PayloadBill:
    breakpoints: tuple[str, ...]       # where each breakpoint sat
    breakpoint_tokens: tuple[int, ...]  # the prefix length at each, in tokens
    bill: Bill
    uncached_cost_usd: float           # the same request with no cache at all

    def to_json(self) -> dict[str, Any]:
        return {"breakpoints": list(self.breakpoints),
                "breakpoint_tokens": list(self.breakpoint_tokens), **self.bill.to_json(),
                "uncached_cost_usd": self.uncached_cost_usd}


def blocks_of(payload: Mapping[str, Any], count_tokens: Callable[[str], int]) -> list[Block]:
    """The payload's cacheable blocks in the order the cache reads them."""
    out: list[Block] = []
    digest = hashlib.blake2b(str(payload.get("model", "")).encode(), digest_size=16).digest()
    for where, block, text in _walk(payload):
        control = block.get("cache_control")
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        digest = hashlib.blake2b(digest + canonical_json([where.split("[")[0], plain]).encode(),
                                 digest_size=16).digest()
        ttl = control.get("ttl") if isinstance(control, Mapping) else None
        out.append(Block(where, count_tokens(text), control is not None,
                         _TTL_SECONDS.get(ttl) if isinstance(ttl, str) else None, digest))
    return out


def _walk(payload: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    for i, tool in enumerate(payload.get("tools") or ()):
        yield f"tools[{i}]", tool, canonical_json({k: v for k, v in tool.items()
                                                   if k != "cache_control"})
    system = payload.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for i, block in enumerate(system or ()):
        yield f"system[{i}]", block, str(block.get("text", ""))
    for i, message in enumerate(payload.get("messages") or ()):
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for j, block in enumerate(content or ()):
            keyed = {**block, "role": message.get("role")}
            if "cache_control" in block:
                keyed["cache_control"] = block["cache_control"]
            yield f"messages[{i}].content[{j}]", keyed, _block_text(block)


def _block_text(block: Mapping[str, Any]) -> str:
    match block.get("type"):
        case "text":
            return str(block.get("text", ""))
        case "tool_use":
            return f"{block.get('name', '')} {canonical_json(block.get('input', {}))}"
        case "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                return "".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
            return str(content or "")
    return canonical_json(block)


class BreakpointCache:
    """Anthropic's prompt cache, replayed over payloads sent in order."""

    def __init__(self, profile: CacheProfile, count_tokens: Callable[[str], int], *,
                 model: str | None = None) -> None:
        self.profile = profile
        self.count_tokens = count_tokens
        self.model = model
        self._entries: dict[bytes, float] = {}  # prefix digest -> when it expires

    def bill(self, payload: Mapping[str, Any], *, at: float, input_price: float) -> PayloadBill:
        """Bill ``payload`` sent at time ``at`` (seconds), and cache what it writes."""
        blocks = blocks_of(payload, self.count_tokens)
        ends, total = [], 0
        for block in blocks:
            total += block.tokens
            ends.append(total)
        marks = [i for i, b in enumerate(blocks) if b.marked]
        minimum = self.profile.min_prefix(self.model)
        cached = [i for i in marks if ends[i] >= minimum] if self.profile.caching else []
        lookback = self.profile.lookback_blocks or 0
        hit = -1
        for mark in cached:
            for i in range(mark, max(-1, mark - lookback - 1), -1):
                if self._entries.get(blocks[i].digest, float("-inf")) >= at:
                    hit = max(hit, i)
                    break
        read = ends[hit] if hit >= 0 else 0
        last = cached[-1] if cached else -1
        written = ends[last] - read if last > hit else 0
        uncached = total - read - written
        default_ttl = self.profile.ttl_seconds or 300.0
        if hit >= 0:
            self._entries[blocks[hit].digest] = at + (blocks[hit].ttl_s or default_ttl)
        for i in cached:
            if i > hit:
                self._entries[blocks[i].digest] = at + (blocks[i].ttl_s or default_ttl)
        bill = self.profile.bill_usage(uncached, read, written, input_price)
        return PayloadBill(tuple(blocks[i].where for i in marks), tuple(ends[i] for i in marks),
                           bill, total * input_price / 1e6)


def payload_of(params: Mapping[str, Any], messages: Any) -> dict[str, Any]:
    """A recorded call's payload, put back together (``SentRequest.params`` and messages)."""
    return {**params, "messages": list(messages)}
