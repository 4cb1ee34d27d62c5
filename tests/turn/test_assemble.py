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


def _u(text: str) -> tuple[ItemKind, dict]:
    return (ItemKind.USER, {"text": text})


def _a(text: str) -> tuple[ItemKind, dict]:
    return (ItemKind.ASSISTANT, {"text": text})


# a branch with every event the view folds: parallel tool calls, an empty imported message,
# constraints set, edited and withdrawn, and each compaction strategy in turn
LONG = _items(
    _u("Plan a trip to Oslo."), _a("Sure."),
    (ItemKind.CONSTRAINT, {"text": "Answer in French.", "source": "said", "from_seq": 1}),
    _u("Weather?"),
    (ItemKind.TOOL_CALL, {"call_id": "t1", "name": "weather", "arguments": {"city": "Oslo"}}),
    (ItemKind.TOOL_CALL, {"call_id": "t2", "name": "time", "arguments": {"tz": "CET"}}),
    (ItemKind.TOOL_RESULT, {"call_id": "t1", "output": "4°C, rain", "untrusted": True,
                            "tool": "weather"}),
    (ItemKind.TOOL_RESULT, {"call_id": "t2", "output": "14:02"}),
    _a("Il pleut."), _u(""),
    (ItemKind.COMPACTION, {"strategy": "clear_tool_results", "cleared": [7], "pinned": [3]}),
    _u("Hotels?"), _a("Trois hôtels."),
    (ItemKind.CONSTRAINT, {"text": "Answer in Norwegian.", "source": "user", "replaces": 3}),
    (ItemKind.CONSTRAINT, {"text": "Be brief.", "source": "user"}),
    _u("Museums?"), _a("Munch."),
    (ItemKind.COMPACTION, {"strategy": "window", "through_seq": 12, "pinned": [14, 15]}),
    (ItemKind.CONSTRAINT_REMOVED, {"constraint_seq": 15}),
    _u("Food?"), _a("Fisk."),
    (ItemKind.COMPACTION, {"strategy": "pin", "pinned": [14]}),
    _u("Trains?"), _a("Bergen line."),
    (ItemKind.COMPACTION, {"strategy": "summary", "through_seq": 21,
                           "summary": "Trip to Oslo planned.", "pinned": [14]}),
    _u("Thanks!"), _a("Bye."), _u("One more thing."),
)


def test_a_branch_assembled_turn_by_turn_equals_its_assembly_from_scratch() -> None:
    memo = MessageMemo()
    for end in range(1, len(LONG) + 1):
        assert assemble(LONG[:end], system="s", memo=memo) == assemble(LONG[:end], system="s"), end


def test_interleaved_branches_and_conversations_each_assemble_as_from_scratch() -> None:
    other = [LONG[:11]]
    for new in (_u("Or Bergen?"), _a("Bergen aussi."), _u("Trains?")):
        other.append(other[-1] + [_next(other[-1], new)])
    fork = LONG[:5] + [_next(LONG[:5], _a("Checking."))]
    memo = MessageMemo(branches=2)
    histories = [LONG[:end] for end in range(11, len(LONG) + 1)]
    for step, history in enumerate(histories):
        assert assemble(history, memo=memo) == assemble(history)
        branch = other[min(step, len(other) - 1)]
        assert assemble(branch, memo=memo) == assemble(branch)
        assert assemble(fork, memo=memo) == assemble(fork)  # a third branch: evicts, rebuilds
        assert assemble(HISTORY, memo=memo) == assemble(HISTORY)  # another conversation


def _next(history: list[Item], spec: tuple[ItemKind, dict]) -> Item:
    from threadline.items import next_item
    return next_item(history, NewItem(*spec))


class _Gone:
    def __getattr__(self, name: str) -> object:
        raise AssertionError("an item the previous turn folded in was visited again")


def test_the_next_turn_folds_in_only_what_was_appended() -> None:
    memo = MessageMemo()
    assemble(LONG[:20], memo=memo)
    # every item but the last one folded in is replaced: only it and the new items are read
    history = [_Gone()] * 19 + LONG[19:]
    request = assemble(history, memo=memo)  # type: ignore[arg-type]
    assert request == assemble(LONG)


def test_the_memo_keeps_a_bounded_number_of_items() -> None:
    memo = MessageMemo(capacity=50)
    for n in range(10):
        history = chain_items(f"c_{n}", [NewItem(ItemKind.USER, {"text": f"m{i}"})
                                         for i in range(20)], created_at=_T)
        assert assemble(history, memo=memo) == assemble(history)
    assert memo._shown_items <= 50 and len(memo._shown) <= 3


def _kept(text: str) -> tuple[ItemKind, dict]:
    return (ItemKind.CONTEXT, {"provider": "reminder", "kept": [["reminder", text]]})


KEPT = _items(
    _u("Plan a trip to Oslo."), _kept("the goal: Oslo"), _a("Sure."),
    _u("Weather?"), _a("Rain."),
    _u("Hotels?"), _kept("the goal: Oslo"), _kept("stay on topic"), _a("Three."),
    (ItemKind.COMPACTION, {"strategy": "window", "through_seq": 5}),
    _u("Museums?"), _kept("the goal: Oslo, again"), _a("Munch."),
    _u("Food?"),
)


def test_a_kept_block_is_shown_above_its_turns_message_from_then_on() -> None:
    first = assemble(KEPT[:2])  # the turn it was recorded for: in the history, not the tail
    assert [m.content for m in first.messages] == ["[reminder]\nthe goal: Oslo",
                                                   "Plan a trip to Oslo."]
    history = first.segment(SegmentKind.HISTORY)
    assert history is not None
    assert [m.content for m in history.messages] == ["[reminder]\nthe goal: Oslo"]
    later = assemble(KEPT[:9])
    assert [m.content for m in later.messages] == [
        "[reminder]\nthe goal: Oslo", "Plan a trip to Oslo.", "Sure.", "Weather?", "Rain.",
        "[reminder]\nthe goal: Oslo", "[reminder]\nstay on topic", "Hotels?", "Three."]
    # each turn's request begins with the whole previous one (none crosses the compaction)
    for before, after in ((2, 4), (4, 8), (12, 14)):
        old, new = assemble(KEPT[:before]).messages, assemble(KEPT[:after]).messages
        assert list(new[:len(old)]) == list(old)
    # a window compaction takes the kept blocks of the turns it cuts, and only those
    assert [m.content for m in assemble(KEPT).messages] == [
        "[reminder]\nthe goal: Oslo", "[reminder]\nstay on topic", "Hotels?", "Three.",
        "[reminder]\nthe goal: Oslo, again", "Museums?", "Munch.", "Food?"]


def test_kept_blocks_fold_in_incrementally_as_they_would_at_once() -> None:
    memo = MessageMemo()
    for end in range(1, len(KEPT) + 1):
        assert assemble(KEPT[:end], memo=memo) == assemble(KEPT[:end])
    # a block recorded in a later commit than its message (a retried turn) goes above it too
    late = _items(_u("Hello"), _a("Hi."), _u("Again"), _kept("the goal: hello"))
    memo = MessageMemo()
    assert assemble(late[:3], memo=memo) == assemble(late[:3])
    assert [m.content for m in assemble(late, memo=memo).messages] == [
        "Hello", "Hi.", "[reminder]\nthe goal: hello", "Again"]
    assert assemble(late, memo=memo) == assemble(late)
