"""Where a re-rendered request first stops matching the recorded one, byte by byte.

The bytes compared are the request's exact bytes (``SentRequest.exact_bytes``: the rendered
prompt where the backend renders one, else the canonical JSON payload), or, where the record
can only be compared by its messages, the canonical JSON of both payloads. The first byte that
differs is then named by the request's layout, in segment order: the tools, then the message
it falls in (its segment, its log item, and which field of it differs), then the payload's
other fields, then the rendering of messages that are themselves equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.calls import SentRequest
from threadline.request import Request, SegmentKind
from threadline.sequences import common_prefix_len

# the segments a difference is named by, most stable first (the current turn is told apart
# into its volatile tail and the new message)
SEGMENTS = ("tools", "system", "pinned", "static", "summary", "history", "tail", "message")
_FIELDS = ("role", "content", "tool_calls", "tool_call_id")
_EXCERPT = 40  # bytes shown each side of a difference


@dataclass(frozen=True)
class Difference:
    segment: str          # one of SEGMENTS, or "params" (a payload field), or "current"
    byte: int             # offset of the first differing byte in the compared bytes
    message: int | None   # index of the first differing message (None: before any)
    seq: int | None       # the log item that message shows (None: synthesised, or unknown)
    field: str            # role | content | tool_calls | tool_call_id | messages | tools |
    #                       a param's name | rendering | tokens
    recorded: str         # the recorded bytes from a little before the difference
    replayed: str         # today's bytes from the same place

    def to_json(self) -> dict[str, Any]:
        return {"segment": self.segment, "byte": self.byte, "message": self.message,
                "seq": self.seq, "field": self.field, "recorded": self.recorded,
                "replayed": self.replayed}


def _bytes(sent: SentRequest, rendered: bool) -> bytes:
    return sent.exact_bytes() if rendered else sent.payload_json().encode("utf-8")


def _excerpt(data: bytes, at: int) -> str:
    return data[max(0, at - _EXCERPT):at + _EXCERPT].decode("utf-8", "replace")


def first_difference(recorded: SentRequest, replayed: SentRequest, request: Request,
                     recorded_layout: Sequence[Mapping[str, Any]] = ()) -> Difference | None:
    """The first place ``replayed`` (today's rendering of ``request``) departs from
    ``recorded``; None when every byte (and token id) is the same. ``recorded_layout`` is the
    recorded prefix report's layout, naming messages today's request no longer has."""
    rendered = recorded.rendering is not None and replayed.rendering is not None
    old, new = _bytes(recorded, rendered), _bytes(replayed, rendered)
    if old == new and (not rendered or recorded.tokens == replayed.tokens):
        return None
    byte = common_prefix_len(old, new)

    def found(segment: str, message: int | None, seq: int | None, field: str) -> Difference:
        return Difference(segment, byte, message, seq, field, _excerpt(old, byte),
                          _excerpt(new, byte))

    if recorded.params.get("tools") != replayed.params.get("tools"):
        return found("tools", None, None, "tools")
    index = common_prefix_len(recorded.messages, replayed.messages)
    if index < max(len(recorded.messages), len(replayed.messages)):
        segment, seq = segment_at(request, index, recorded_layout)
        field = "messages"  # one request has a message the other has not
        if index < min(len(recorded.messages), len(replayed.messages)):
            was, now = recorded.messages[index], replayed.messages[index]
            field = next((k for k in _FIELDS if was.get(k) != now.get(k)), "content")
        return found(segment, index, seq, field)
    keys = sorted(set(recorded.params) | set(replayed.params))
    changed = next((k for k in keys if recorded.params.get(k) != replayed.params.get(k)), None)
    if changed is not None:
        return found("params", None, None, changed)
    # the same messages, rendered differently: name the message whose part holds the byte
    assert recorded.rendering is not None and replayed.rendering is not None
    parts = replayed.rendering.parts
    part = next((i for i, p in enumerate(parts) if p.bytes_end > byte), len(parts) - 1)
    if part >= len(request.messages):  # past the messages: the generation prompt
        return found("message", part, None, "rendering" if old != new else "tokens")
    segment, seq = segment_at(request, part, recorded_layout)
    return found(segment, part, seq, "rendering" if old != new else "tokens")


def segment_at(request: Request, index: int,
               recorded_layout: Sequence[Mapping[str, Any]] = ()) -> tuple[str, int | None]:
    """The segment message ``index`` belongs to, and the log item it shows. In the current
    turn a synthesised message is the tail and one from the log the new message; past the end
    of ``request``, the recorded layout names it (its current turn as a whole: "current")."""
    at = index
    for segment in request.segments:
        if at < len(segment.messages):
            message = segment.messages[at]
            if segment.kind is SegmentKind.CURRENT:
                return ("tail" if message.seq is None else "message"), message.seq
            return str(segment.kind), message.seq
        at -= len(segment.messages)
    for part in recorded_layout:
        if part["start"] <= index < part["start"] + part["count"]:
            return str(part["segment"]), None
    return "current", None
