"""Diagnosing prefix reuse in another system's request log (``threadline cache diagnose``).

Input: one request per line, OpenAI chat-completions or Anthropic Messages JSON, in the order
they were sent for one conversation. Each request is normalised into blocks (the tools, the
system prompt, then one block per message), consecutive requests are compared, and the
pattern is named:

``volatile_header``  reuse flat and low from turn 2: a value in the header (the system prompt
                     or the first message) changes every request — a timestamp, a request id.
``history_rewrite``  reuse collapses at some turns because earlier history was rewritten there:
                     a summariser firing every N turns, or retrieval refreshed above the history.
``tools_changed``    the tool definitions were re-ordered or changed.
``healthy``          every request extends the previous one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadline.cache.prefix import looks_volatile, word_at
from threadline.errors import InputError
from threadline.items import canonical_json
from threadline.sequences import common_prefix_len


@dataclass(frozen=True)
class LoggedRequest:
    tools: str
    system: str
    messages: tuple[str, ...]

    @property
    def blocks(self) -> tuple[str, ...]:
        return (self.tools, self.system, *self.messages)

    @property
    def text(self) -> str:
        return "".join(self.blocks)


@dataclass(frozen=True)
class Finding:
    kind: str
    turn: int
    position: int | None  # character offset in the normalised request where reuse stops
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "turn": self.turn, "position": self.position,
                "detail": self.detail}


@dataclass(frozen=True)
class TurnReuse:
    turn: int
    chars: int
    reused: int
    best: int  # the previous request's length: what append-only would reuse

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "chars": self.chars, "reused": self.reused,
                "best": self.best, "ratio": round(self.reused / self.chars, 4)
                if self.chars else 0.0}


def parse_log(data: bytes) -> list[LoggedRequest]:
    requests = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            body = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise InputError(f"line {number} is not JSON in UTF-8 ({err}); nothing was read",
                             hint="give one request body per line (JSONL)") from err
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise InputError(f"line {number} is not a chat request: it needs a 'messages' list",
                             hint="OpenAI chat-completions or Anthropic Messages bodies")
        requests.append(_normalise(body))
    if not requests:
        raise InputError("the log has no requests", hint="check the path")
    return requests


def _normalise(body: dict[str, Any]) -> LoggedRequest:
    messages = list(body["messages"])
    system = body.get("system", "")
    if isinstance(system, list):  # Anthropic text blocks
        system = "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    lead = []
    while messages and isinstance(messages[0], dict) and \
            messages[0].get("role") in ("system", "developer"):
        lead.append(_content_text(messages.pop(0).get("content")))
    system = "\n".join([str(system), *lead]) if lead else str(system)
    return LoggedRequest(tools=canonical_json(body.get("tools") or []), system=system,
                         messages=tuple(canonical_json(_without_cache_marks(m))
                                        for m in messages))


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _without_cache_marks(value: Any) -> Any:
    """Breakpoint markers move every turn by design; they are not content."""
    if isinstance(value, dict):
        return {k: _without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_marks(v) for v in value]
    return value


def diagnose(requests: Sequence[LoggedRequest]) -> tuple[list[TurnReuse], list[Finding]]:
    turns = [TurnReuse(1, len(requests[0].text), 0, 0)]
    volatile: list[tuple[int, int, str, str, str]] = []  # turn, pos, kind, before, after
    rewrites: list[tuple[int, int, int]] = []             # turn, pos, message index
    tools: list[tuple[int, bool]] = []                    # turn, reordered
    for turn, (before, after) in enumerate(zip(requests, requests[1:], strict=False), start=2):
        old, new = before.text, after.text
        reused = common_prefix_len(old, new)
        turns.append(TurnReuse(turn, len(new), reused, len(old)))
        if reused == len(old):
            continue
        block = common_prefix_len(before.blocks, after.blocks)
        if block == 0:
            old_tools = sorted(json.loads(before.tools), key=canonical_json)
            new_tools = sorted(json.loads(after.tools), key=canonical_json)
            tools.append((turn, old_tools == new_tools))
            continue
        kind = looks_volatile(old, new, reused)
        if block <= 2 and kind is not None:  # the system prompt or the first message
            volatile.append((turn, reused, kind, word_at(old, reused), word_at(new, reused)))
        else:
            rewrites.append((turn, reused, block - 2))
    return turns, _findings(turns, volatile, rewrites, tools)


def _findings(turns: list[TurnReuse], volatile: list[tuple[int, int, str, str, str]],
              rewrites: list[tuple[int, int, int]],
              tools: list[tuple[int, bool]]) -> list[Finding]:
    found = []
    if volatile:
        turn, position, kind, old, new = volatile[0]
        share = sum(t.reused for t in turns[1:]) / max(1, sum(t.chars for t in turns[1:]))
        found.append(Finding(
            "volatile_header", turn, position,
            f"the header changes on {len(volatile)} of {len(turns) - 1} turns at a value that "
            f"looks like {kind} ({old!r} then {new!r}); everything after it is re-sent, so "
            f"reuse stays at {share:.0%} from turn {turn}. Move it to the end of the request."))
    if rewrites:
        turn, position, message = rewrites[0]
        at_turns = [t for t, _, _ in rewrites]
        messages = Counter(m for _, _, m in rewrites)
        gaps = {b - a for a, b in zip(at_turns, at_turns[1:], strict=False)}
        if len(at_turns) > 1 and len(gaps) == 1 and gaps != {1}:
            pattern = f"every {gaps.pop()} turns (turns {', '.join(map(str, at_turns))}): " \
                "a summariser or compaction on a timer"
        elif len(messages) == 1 and len(at_turns) > 1:
            pattern = f"on {len(at_turns)} turns, always at message {message}: something is " \
                "refreshed above the history each turn (retrieval spliced in?)"
        else:
            pattern = f"on turns {', '.join(map(str, at_turns))}"
        found.append(Finding("history_rewrite", turn, position,
                             f"history was rewritten {pattern}; reuse collapses to the "
                             f"rewritten point each time. Append instead, and compact rarely, "
                             f"at a task boundary."))
    if tools:
        turn, reordered = tools[0]
        what = "re-ordered" if reordered else "changed"
        found.append(Finding("tools_changed", turn, 0,
                             f"the tool definitions were {what} at turn {turn} (and "
                             f"{len(tools) - 1} more times); nothing after them can be reused. "
                             "Sort them once and keep them byte-stable."))
    if not found:
        found.append(Finding("healthy", 1, None, "every request extends the previous one: "
                             "append-only, as good as reuse gets"))
    return found
