"""Planners propose, measurement is exact, and the view after a compaction is a pure fold."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from threadline.compaction.compact import measure, plan
from threadline.compaction.constraints import new_constraint, removal
from threadline.compaction.plan import Plan, Policy, word_count
from threadline.compaction.view import context_view
from threadline.items import Item, ItemKind, NewItem, chain_items
from threadline.request import Request
from threadline.turn.assemble import assemble

_T = datetime(2026, 5, 3, tzinfo=UTC)
BIG = "row " * 300


def _log(*new: NewItem) -> list[Item]:
    return chain_items("c_p", new, created_at=_T)


def _tool_turn(n: int, tool: str = "search") -> list[NewItem]:
    return [NewItem.user(f"Find order ORD-{n:04d} for FY2025."),
            NewItem.tool_call(f"t{n}", tool, {"order": f"ORD-{n:04d}"}),
            NewItem.tool_result(f"t{n}", f"order ORD-{n:04d}: 3 items, total 41.{n:02d} EUR\n"
                                + BIG),
            NewItem.assistant(f"Order ORD-{n:04d} has 3 items; we chose express because it "
                              f"ships today.")]


def _assemble(history: Sequence[Item]) -> Request:
    return assemble(history, system="You are an order assistant.")


def _apply(history: list[Item], chosen: Plan) -> list[Item]:
    return _log(*[NewItem(i.kind, i.content) for i in history], chosen.to_item())


HISTORY = _log(*[x for n in range(1, 7) for x in _tool_turn(n)],
               NewItem.user("And the oldest one?"))
POLICY = Policy(high_water=3_000, low_water=2_000, keep_tool_results=2, clear_at_least=100)


def test_clearing_comes_first_and_keeps_the_newest_results_and_every_call() -> None:
    chosen = plan(HISTORY, _assemble, word_count, POLICY, reason="manual")
    assert chosen is not None and chosen.strategy == "clear_tool_results"
    results = [i.seq for i in HISTORY if i.kind is ItemKind.TOOL_RESULT]
    assert chosen.cleared == tuple(results[:-2])
    after = _apply(HISTORY, chosen)
    messages = _assemble(after).openai_messages()
    assert sum(1 for m in messages if m.get("tool_calls")) == 6  # every call stays
    placeholders = [m["content"] for m in messages if "cleared from the context" in m["content"]]
    assert len(placeholders) == 4 and f"#{results[0]}" in placeholders[0]
    # the estimate is exact: it is the request the next call will send
    assert chosen.tokens_after == measure(after, _assemble, word_count)
    assert chosen.tokens_before == measure(HISTORY, _assemble, word_count)
    # the prefix up to the first cleared result stays cached
    assert 0 < chosen.kept_prefix < chosen.tokens_after


def test_excluded_tools_are_never_cleared() -> None:
    history = _log(*_tool_turn(1, "policy_lookup"), *_tool_turn(2), *_tool_turn(3),
                   *_tool_turn(4))
    chosen = plan(history, _assemble, word_count,
                  Policy(low_water=100, high_water=200, keep_tool_results=1, clear_at_least=1,
                         exclude_tools=frozenset({"policy_lookup"})),
                  reason="manual", strategy="clear_tool_results")
    assert chosen is not None
    assert history[2].seq not in chosen.cleared and len(chosen.cleared) == 2


def test_clearing_too_little_is_not_worth_a_reset() -> None:
    policy = Policy(high_water=2_000, low_water=1_000, keep_tool_results=5, clear_at_least=5_000)
    chosen = plan(HISTORY, _assemble, word_count, policy, reason="manual")
    assert chosen is None or chosen.strategy != "clear_tool_results"


def test_a_window_drops_whole_old_turns_in_one_step_and_keeps_the_current_one() -> None:
    chosen = plan(HISTORY, _assemble, word_count, POLICY, reason="manual", budget=1_000,
                  strategy="window")
    assert chosen is not None and chosen.through_seq is not None
    after = _apply(HISTORY, chosen)
    view = context_view(after)
    kinds = [i.kind for i in view.items]
    assert kinds[0] is ItemKind.USER  # the view starts at a turn: no orphaned tool result
    assert view.items[-1].text == "And the oldest one?"
    calls = {i.content["call_id"] for i in view.items if i.kind is ItemKind.TOOL_CALL}
    assert calls == {i.content["call_id"] for i in view.items if i.kind is ItemKind.TOOL_RESULT}
    assert chosen.tokens_after <= 1_000


def test_a_summary_keeps_what_the_user_said_and_identifiers_verbatim() -> None:
    chosen = plan(HISTORY, _assemble, word_count, POLICY, reason="task_boundary",
                  strategy="summary", budget=1_200)
    assert chosen is not None and chosen.summary is not None
    dropped = [i for i in HISTORY if i.seq <= (chosen.through_seq or 0)]
    for item in dropped:
        if item.kind is ItemKind.USER:
            assert f"the user said: {item.text}" in chosen.summary
    assert "ORD-0001" in chosen.summary and "41.01 EUR" in chosen.summary
    assert "we chose express because it ships today" in chosen.summary
    assert "tool search(order=ORD-0001) returned" in chosen.summary
    after = _apply(HISTORY, chosen)
    first = _assemble(after).openai_messages()[1]["content"]
    assert first.startswith("Summary of the conversation so far:")


def test_under_a_tight_budget_detail_goes_first_and_the_user_s_words_stay() -> None:
    chosen = plan(HISTORY, _assemble, word_count, POLICY, reason="manual", strategy="summary",
                  budget=300)
    assert chosen is not None and chosen.summary is not None
    assert "the model inferred" not in chosen.summary
    for n in range(1, 6):
        assert f"the user said: Find order ORD-{n:04d} for FY2025." in chosen.summary


def test_a_second_summary_carries_the_first_forward() -> None:
    first = plan(HISTORY, _assemble, word_count, POLICY, reason="manual", strategy="summary",
                 budget=1_500)
    assert first is not None and first.summary is not None
    history = _apply(HISTORY, first)
    history = _log(*[NewItem(i.kind, i.content) for i in history],
                   NewItem.assistant("Order ORD-0001 is the oldest."), *_tool_turn(7),
                   *_tool_turn(8), NewItem.user("Thanks"))
    second = plan(history, _assemble, word_count, POLICY, reason="manual", strategy="summary",
                  budget=600)
    assert second is not None and second.summary is not None
    assert first.summary in second.summary


def test_constraints_are_pinned_at_a_compaction_and_changes_wait_in_the_tail() -> None:
    history = _log(NewItem.user("Always use British spelling."), NewItem.assistant("OK."),
                   new_constraint("Always use British spelling.", source="said", from_seq=1),
                   *_tool_turn(1), *_tool_turn(2), NewItem.user("Next?"))
    before = _assemble(history).openai_messages()
    chosen = plan(history, _assemble, word_count, POLICY, reason="manual", strategy="window",
                  budget=300)
    assert chosen is not None and chosen.pinned == (3,)
    after = _apply(history, chosen)
    messages = _assemble(after).openai_messages()
    assert messages[1] == {"role": "system",
                           "content": "Standing instructions:\n- Always use British spelling."}
    assert before[1] == {"role": "user", "content": "Always use British spelling."}
    # a new rule and a withdrawal go in the tail: the pinned prefix does not move
    n = after[-1].seq
    changed = _log(*[NewItem(i.kind, i.content) for i in after],
                   new_constraint("Quote prices in EUR.", source="user"), removal(3))
    changed_messages = _assemble(changed).openai_messages()
    assert changed_messages[:2] == messages[:2]
    tail = changed_messages[-2]["content"]
    assert "Quote prices in EUR." in tail and "no longer in force" in tail
    assert "Always use British spelling." in tail
    assert n + 2 == changed[-1].seq


def test_pinning_only_refreshes_the_pinned_constraints() -> None:
    history = _log(NewItem.user("Hi"), new_constraint("Never write to prod.", source="user"))
    chosen = plan(history, _assemble, word_count, POLICY, reason="manual", strategy="pin")
    assert chosen is not None and chosen.pinned == (2,) and chosen.cleared == ()
    view = context_view(_apply(history, chosen))
    assert [c.text for c in view.pinned] == ["Never write to prod."] and view.added == ()


def test_nothing_to_compact_gives_no_plan() -> None:
    history = _log(NewItem.user("Hi"))
    assert plan(history, _assemble, word_count, POLICY, reason="manual") is None
