"""Why a request stopped repeating the previous one: the prefix report for a call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from threadline.cache.prefix import (
    BLOCK_SIZE,
    Cause,
    Divergence,
    PrefixReport,
    layout_of,
    looks_volatile,
)
from threadline.calls import SentRequest, known_messages, shared_messages, shared_rendering
from threadline.items import canonical_json
from threadline.request import Message, Request
from threadline.sequences import common_prefix_len


@dataclass(frozen=True)
class Previous:
    """The call a new request is compared with: the last one on its branch (or, for a fork's
    first call, the last one in the conversation)."""

    call_id: str
    request: SentRequest
    layout: tuple[tuple[str, str, int, int], ...]
    same_branch: bool = True
    compaction_seq: int | None = None  # the compaction event its request went through


def _text(request: SentRequest) -> str:
    return request.prompt if request.prompt is not None else request.payload_json()


def _segment_at(layout: Sequence[tuple[str, str, int, int]], index: int) -> str | None:
    for segment, _, start, count in layout:
        if start <= index < start + count:
            return segment
    return None


def _tools(request: SentRequest) -> list[Any]:
    tools = request.params.get("tools")
    return list(tools) if isinstance(tools, list) else []


def report(sent: SentRequest, request: Request, previous: Previous | None) -> PrefixReport:
    """The prefix report of ``sent`` (assembled as ``request``) against ``previous``. Where
    both requests carry the assembler's history mark, the history they share is confirmed by
    its chained hashes and only what follows it is compared or serialised, as the store does
    for its deltas: the report costs what the turn added."""
    rendering = sent.rendering
    tokens = None if rendering is None else rendering.n_tokens
    layout = layout_of(request)
    blocks = None if tokens is None else tokens // BLOCK_SIZE
    if previous is None:
        prompt_bytes = sent.payload_size()[1] if rendering is None else rendering.n_bytes
        return PrefixReport(None, prompt_bytes, 0, 0, tokens, None if tokens is None else 0,
                            None, None if tokens is None else 0, blocks, Cause.FIRST_CALL,
                            "no earlier call to reuse", None, layout, request.compaction_seq)
    if rendering is None and not sent.params and (previous.request.rendering is not None
                                                  or previous.request.params):
        # only messages are known (a call that failed before building its payload): they are
        # measured against the previous request's messages, not its rendering or payload (a
        # previous request of messages alone is kept as it is, with its measured size)
        previous = replace(previous, request=SentRequest(previous.request.model,
                                                         previous.request.messages,
                                                         history=previous.request.history))
    before = previous.request
    known = known_messages(before, sent)
    reused_tokens = previous_tokens = reused_blocks = None
    if rendering is not None and before.rendering is not None:
        # renderings compare part by part: what the two share costs nothing to confirm
        shared = shared_rendering(before, sent, known)
        shared_chars, reused_bytes = shared.chars, shared.bytes
        previous_chars, previous_bytes = before.rendering.chars, before.rendering.n_bytes
        if tokens is not None and before.rendering.n_tokens is not None:
            reused_tokens, previous_tokens = shared.tokens, before.rendering.n_tokens
    elif rendering is None and before.rendering is None:
        shared = sent.payload_shared(before, known)
        shared_chars, reused_bytes = shared.chars, shared.bytes
        previous_chars, previous_bytes = before.payload_size()
    else:  # one rendered, the other not: their texts compare whole
        text, old_text = _text(sent), _text(before)
        shared_chars, previous_chars = common_prefix_len(old_text, text), len(old_text)
        reused_bytes = len(text[:shared_chars].encode("utf-8"))
        previous_bytes = len(old_text.encode("utf-8"))
    prompt_bytes = sent.payload_size()[1] if rendering is None else rendering.n_bytes
    if reused_tokens is not None:
        # parent-chained block hashes agree exactly as far as the tokens do, in whole blocks
        # (tests/cache/test_attribution.py checks this against block_hashes)
        reused_blocks = reused_tokens // BLOCK_SIZE
    cause, detail, divergence = _attribute(sent, request, previous, shared_chars,
                                           previous_chars, reused_bytes, reused_tokens, layout,
                                           known)
    return PrefixReport(previous.call_id, prompt_bytes, reused_bytes, previous_bytes, tokens,
                        reused_tokens, previous_tokens, reused_blocks, blocks, cause, detail,
                        divergence, layout, request.compaction_seq)


def _attribute(sent: SentRequest, request: Request, previous: Previous, shared_chars: int,
               previous_chars: int, reused_bytes: int, reused_tokens: int | None,
               layout: Sequence[tuple[str, str, int, int]], known: int
               ) -> tuple[Cause, str, Divergence | None]:
    before = previous.request
    if before.model != sent.model:
        return Cause.MODEL_CHANGED, f"model changed from {before.model} to {sent.model}", None
    old_tools, new_tools = _tools(before), _tools(sent)
    if old_tools != new_tools:
        key = [canonical_json(t) for t in old_tools], [canonical_json(t) for t in new_tools]
        same_set = sorted(key[0]) == sorted(key[1])
        return (Cause.TOOLS_REORDERED if same_set else Cause.TOOLS_CHANGED,
                "tool definitions re-ordered" if same_set else "tool definitions changed",
                Divergence(0, reused_bytes, reused_tokens, "tools", None, "tools"))
    if shared_chars == previous_chars:
        if previous.same_branch:
            return Cause.APPEND_ONLY, "the previous request is an exact prefix", None
        return Cause.FORK, "first call on this branch; compared with the branch it forked from", \
            None
    index = shared_messages(before, sent, known)
    if index >= min(len(before.messages), len(sent.messages)):
        if len(sent.messages) < len(before.messages):
            return Cause.HISTORY_REWRITTEN, "messages were removed from the end of the history", \
                Divergence(index, reused_bytes, reused_tokens, None, None, "messages")
        if sent.rendering is None and before.rendering is None and \
                len(sent.messages) > len(before.messages) and before.params == sent.params:
            # a payload's JSON closes its message list: appending never keeps it a byte prefix
            if previous.same_branch:
                return Cause.APPEND_ONLY, "the previous request's messages are a prefix", None
            return Cause.FORK, "first call on this branch; compared with the branch it " \
                "forked from", None
        return Cause.TEMPLATE_CHANGED, "the same messages rendered differently", \
            Divergence(index, reused_bytes, reused_tokens, None, None, "rendering")
    segment = _segment_at(layout, index)
    message = _message_at(request, index)
    seq = None if message is None else message.seq
    old_message, new_message = before.messages[index], sent.messages[index]
    field = next((k for k in ("role", "content", "tool_calls", "tool_call_id")
                  if old_message.get(k) != new_message.get(k)), "content")
    divergence = Divergence(index, reused_bytes, reused_tokens, segment, seq, field)
    if not previous.same_branch:
        return Cause.FORK, f"this branch forked; it differs from the other at message {index}", \
            divergence
    if request.compaction_seq is not None and request.compaction_seq != previous.compaction_seq:
        return Cause.COMPACTION_RESET, f"compaction #{request.compaction_seq} changed the " \
            f"context from message {index} on (a deliberate, priced reset)", divergence
    old_segment = _segment_at(previous.layout, index)
    if old_segment == "current" and segment != "current" and _tail_only(previous, index):
        return Cause.TAIL_REPLACED, "only the previous turn's volatile tail differs", divergence
    # the rare causes below read the whole texts: not on the per-turn path
    volatile = looks_volatile(_text(before), _text(sent), shared_chars)
    if segment in ("system", "tools") or (message is not None and message.seq is None
                                          and segment != "current"):
        if volatile is not None:
            return Cause.VOLATILE_VALUE, f"the {segment} segment differs in what looks like " \
                f"{volatile}, above the history", divergence
        if segment == "system":
            return Cause.SYSTEM_CHANGED, "the system prompt changed", divergence
        return Cause.VOLATILE_VALUE, f"content without a log item was inserted at message " \
            f"{index}, above the history", divergence
    where = f"item #{seq}" if seq is not None else f"message {index}"
    return Cause.HISTORY_REWRITTEN, f"history rewritten at {where} ({field} changed" + \
        (f"; it looks like {volatile}" if volatile else "") + ")", divergence


def _message_at(request: Request, index: int) -> Message | None:
    """Message ``index`` of the request, found segment by segment (not by listing them all)."""
    for segment in request.segments:
        if index < len(segment.messages):
            return segment.messages[index]
        index -= len(segment.messages)
    return None


def _tail_only(previous: Previous, index: int) -> bool:
    """True when ``index`` is where the previous request's turn-stability tail began."""
    for segment, stability, start, _ in previous.layout:
        if segment == "current" and stability == "turn":
            return index == start
    return False

