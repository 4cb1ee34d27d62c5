"""Naming the reuse pattern in other systems' request logs."""

from __future__ import annotations

import json

import pytest

from threadline.cache.diagnose import diagnose, parse_log
from threadline.errors import InputError

TOPICS = ["", "refund policy", "shipping times", "warranty terms", "store hours", "returns"]
SYSTEM = "You are a support agent for Acme. Follow the refund policy. " * 5


def _openai_log(turns: int, system_at=lambda n: SYSTEM, history_at=None,
                tools_at=lambda n: [{"type": "function", "function": {"name": "a"}},
                                    {"type": "function", "function": {"name": "b"}}]) -> bytes:
    lines, history = [], []
    for n in range(1, turns + 1):
        history = history + [{"role": "user", "content": f"question {n}"}]
        messages = history if history_at is None else history_at(n, history)
        lines.append(json.dumps({"model": "gpt-x", "tools": tools_at(n), "messages": [
            {"role": "system", "content": system_at(n)}, *messages]}))
        history = history + [{"role": "assistant", "content": f"answer {n}"}]
    return "\n".join(lines).encode()


def _kinds(data: bytes) -> list[tuple[str, int]]:
    return [(f.kind, f.turn) for f in diagnose(parse_log(data))[1]]


def test_an_append_only_log_is_healthy() -> None:
    turns, findings = diagnose(parse_log(_openai_log(6)))
    assert [(f.kind, f.turn) for f in findings] == [("healthy", 1)]
    assert all(t.reused == t.best for t in turns[1:])


def test_a_timestamp_in_the_system_prompt_is_a_volatile_header() -> None:
    log = _openai_log(6, system_at=lambda n: f"Now: 2026-05-03 09:{n:02d}. " + SYSTEM)
    turns, findings = diagnose(parse_log(log))
    (finding,) = findings
    assert (finding.kind, finding.turn) == ("volatile_header", 2)
    assert "timestamp" in finding.detail and "'09:01' then '09:02'" in finding.detail
    assert all(t.reused / t.chars < 0.3 for t in turns[1:])


def test_a_request_id_in_the_header() -> None:
    log = _openai_log(4, system_at=lambda n: f"request req_{n:08x}a9f3 " + SYSTEM)
    assert _kinds(log) == [("volatile_header", 2)]


def test_a_summariser_every_four_turns_is_a_history_rewrite() -> None:
    def summarise(n: int, history: list) -> list:
        if n >= 5:
            keep = (n - 1) // 4 * 4  # every 4 turns the oldest turns fold into a summary
            return [{"role": "user", "content": f"Summary of turns 1-{keep}"},
                    *history[2 * keep:]]
        return history

    turns, findings = diagnose(parse_log(_openai_log(13, history_at=summarise)))
    (finding,) = findings
    assert (finding.kind, finding.turn) == ("history_rewrite", 5)
    assert "every 4 turns (turns 5, 9, 13)" in finding.detail


def test_retrieval_refreshed_above_the_history_each_turn() -> None:
    lines, history = [], []
    for n in range(1, 6):
        history.append({"role": "user", "content": [{"type": "text", "text": f"q{n}"}]})
        lines.append(json.dumps({"model": "claude", "max_tokens": 10, "system": [
            {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text",
                                                       "text": f"Context: {TOPICS[n]}"}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                         *history]}))
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"a{n}"}]})
    (finding,) = diagnose(parse_log("\n".join(lines).encode()))[1]
    assert (finding.kind, finding.turn) == ("history_rewrite", 2)
    assert "always at message 0" in finding.detail and "above the history" in finding.detail


def test_reordered_tools() -> None:
    a, b = {"type": "function", "function": {"name": "a"}}, \
        {"type": "function", "function": {"name": "b"}}
    log = _openai_log(5, tools_at=lambda n: [a, b] if n % 2 else [b, a])
    findings = diagnose(parse_log(log))[1]
    assert [(f.kind, f.turn) for f in findings] == [("tools_changed", 2)]
    assert "re-ordered" in findings[0].detail


@pytest.mark.parametrize("data", [b"", b"\n\n", b"not json\n", b'{"model": "x"}\n',
                                  b"\xff\xfe\n"])
def test_bad_logs_are_refused(data: bytes) -> None:
    with pytest.raises(InputError):
        parse_log(data)
