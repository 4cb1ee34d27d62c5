"""Assembly is a pure function of state: same items in, same request out, in a fixed order."""

from __future__ import annotations

from datetime import UTC, datetime

from threadline.items import Item, ItemKind, NewItem, chain_items
from threadline.request import SegmentKind, Stability, TailBlock, ToolSpec
from threadline.turn.assemble import MessageMemo, assemble

_T = datetime(2026, 3, 1, tzinfo=UTC)


def _items(*specs: tuple[ItemKind, dict]) -> list[Item]:
    return chain_items("c_x", [NewItem(kind, content) for kind, content in specs],
                       created_at=_T)


HISTORY = _items(
    (ItemKind.USER, {"text": "What's the weather in Oslo?"}),
    (ItemKind.TOOL_CALL, {"call_id": "t1", "name": "weather", "arguments": {"city": "Oslo"}}),
    (ItemKind.TOOL_CALL, {"call_id": "t2", "name": "time", "arguments": {"tz": "CET"}}),
    (ItemKind.TOOL_RESULT, {"call_id": "t1", "output": "4°C, rain", "is_error": False}),
    (ItemKind.TOOL_RESULT, {"call_id": "t2", "output": "14:02", "is_error": False}),
    (ItemKind.NOTE, {"text": "operator: checked"}),
    (ItemKind.ASSISTANT, {"text": "4°C and raining at 14:02."}),
    (ItemKind.USER, {"text": "And tomorrow?"}),
)


def test_snapshot_of_a_tool_using_conversation() -> None:
    request = assemble(HISTORY, system="You are terse.")
    assert request.openai_messages() == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What's the weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "t1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
            {"id": "t2", "type": "function",
             "function": {"name": "time", "arguments": '{"tz":"CET"}'}}]},
        {"role": "tool", "content": "4°C, rain", "tool_call_id": "t1"},
        {"role": "tool", "content": "14:02", "tool_call_id": "t2"},
        {"role": "assistant", "content": "4°C and raining at 14:02."},
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_segments_come_in_stability_order() -> None:
    request = assemble(HISTORY, system="s")
    assert [(s.kind, s.stability) for s in request.segments] == [
        (SegmentKind.TOOLS, Stability.DEPLOY), (SegmentKind.SYSTEM, Stability.DEPLOY),
        (SegmentKind.PINNED, Stability.CONVERSATION), (SegmentKind.STATIC, Stability.CONVERSATION),
        (SegmentKind.SUMMARY, Stability.CONVERSATION),
        (SegmentKind.HISTORY, Stability.CONVERSATION), (SegmentKind.CURRENT, Stability.TURN)]
    current = request.segment(SegmentKind.CURRENT)
    assert current is not None and [m.content for m in current.messages] == ["And tomorrow?"]
    assert [m.seq for m in request.messages] == [None, 1, 2, 4, 5, 7, 8]


def test_snapshot_with_every_segment_and_a_volatile_tail() -> None:
    marker = Item("c_x", 9, "main", 8, 2, ItemKind.COMPACTION,
                  {"strategy": "summary", "summary": "Oslo: 4°C, rain.",
                   "through_seq": 7}, "b2:0", _T)
    history = [*HISTORY, marker]
    history.append(Item("c_x", 10, "main", 9, 3, ItemKind.USER, {"text": "Umbrella?"},
                        "b2:1", _T))
    request = assemble(history, system="You are terse.", tools=[ToolSpec("weather", "w")],
                       pinned=["Always answer in Celsius."], static=["City list: Oslo."],
                       tail=[TailBlock("time", "2026-03-01T14:02Z"),
                             TailBlock("retrieved", "[doc 3] Umbrellas: yes.")])
    assert request.openai_messages() == [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Standing instructions:\n- Always answer in Celsius."},
        {"role": "system", "content": "City list: Oslo."},
        {"role": "user", "content": "Summary of the conversation so far:\nOslo: 4°C, rain."},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "user", "content": "[time]\n2026-03-01T14:02Z\n\n[retrieved]\n"
                                    "[doc 3] Umbrellas: yes."},
        {"role": "user", "content": "Umbrella?"},
    ]
    # breakpoints: after the tools, the system, the static context, the last completed turn
    assert request.cache_points() == [0, 1, 3, 5]


def test_tools_are_sorted_by_name_whatever_order_they_come_in() -> None:
    tools = [ToolSpec("zeta", "z"), ToolSpec("alpha", "a"), ToolSpec("mid", "m")]
    assert [t.name for t in assemble(HISTORY, tools=tools).tools] == ["alpha", "mid", "zeta"]
    assert assemble(HISTORY, tools=tools) == assemble(HISTORY, tools=list(reversed(tools)))


def test_assembly_is_deterministic_and_appending_only_extends_it() -> None:
    assert assemble(HISTORY, system="s") == assemble(list(HISTORY), system="s")
    shorter = assemble(HISTORY[:7], system="s").openai_messages()
    longer = assemble(HISTORY, system="s").openai_messages()
    assert longer[: len(shorter)] == shorter


def test_a_compaction_marker_stands_in_for_what_it_covers() -> None:
    marker = Item("c_x", 9, "main", 8, 2, ItemKind.COMPACTION,
                  {"strategy": "summary", "summary": "Weather in Oslo: 4°C, rain.",
                   "through_seq": 7}, "b2:0", _T)
    request = assemble([*HISTORY, marker])
    assert request.openai_messages() == [
        {"role": "user", "content": "Summary of the conversation so far:\n"
                                    "Weather in Oslo: 4°C, rain."},
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_the_memo_changes_nothing_but_shares_messages_between_turns() -> None:
    memo = MessageMemo()
    first = assemble(HISTORY[:7], system="s", memo=memo)
    second = assemble(HISTORY, system="s", memo=memo)
    assert second == assemble(HISTORY, system="s")
    shared = [a is b for a, b in zip(first.messages, second.messages, strict=False)]
    assert all(shared[1:2]) and all(shared[4:])  # user and tool messages are reused


def test_an_imported_empty_user_message_is_never_sent() -> None:
    history = _items((ItemKind.USER, {"text": ""}),
                     (ItemKind.ASSISTANT, {"text": "Hello! How can I help?"}),
                     (ItemKind.USER, {"text": "Hi."}),
                     (ItemKind.ASSISTANT, {"text": "Hi!"}),
                     (ItemKind.USER, {"text": " \n"}))
    request = assemble(history)
    assert [(m.role, m.content, m.seq) for m in request.messages] == [
        ("assistant", "Hello! How can I help?", 2), ("user", "Hi.", 3), ("assistant", "Hi!", 4)]
    current = request.segment(SegmentKind.CURRENT)
    assert current is not None and current.messages == ()  # nothing to answer at the head
