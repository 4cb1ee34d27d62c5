"""The goal (and the system prompt's policy) restated in the tail: on exactly the scheduled
turns and the turns it is asked for, recorded with why, and never moving the cached prefix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from threadline.engine import Engine
from threadline.errors import InputError
from threadline.items import ItemKind, NewItem
from threadline.models.scripted import ScriptedModel
from threadline.providers import GoalReminder, Remind
from threadline.providers.goal import ask, request_reminder
from threadline.settings import Settings
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.providers import Gathering, Provider

SYSTEM = "You are a cooking assistant. Only discuss recipes and kitchen safety."
GOAL = "Help me plan a vegetarian dinner for six, with a dessert."
TURNS = [GOAL] + [f"Next question {n}: what about course {n} and its timing?"
                  for n in range(2, 11)]
TAG = "[the conversation's goal, restated]\n"


def play(engine: Engine, turns: Sequence[str] = TURNS,
         options: dict[int, list[object]] | None = None) -> tuple[str, list[str]]:
    """Run ``turns``; the conversation and each turn's call id."""
    cid: str | None = None
    calls = []
    for n, text in enumerate(turns, 1):
        result = engine.run_turn(text, conversation_id=cid,
                                 options=(options or {}).get(n, []))
        cid = result.conversation_id
        calls.append(result.call.id)
    assert cid is not None
    return cid, calls


def sent(store: SQLiteStore, calls: Sequence[str]) -> list[list[dict[str, Any]]]:
    out = []
    for call_id in calls:
        request = store.call(call_id).request
        assert request is not None
        out.append([dict(m) for m in request.messages])
    return out


def tails(store: SQLiteStore, calls: Sequence[str]) -> list[str | None]:
    """Each recorded request's tail: the user message before the new one, if any."""
    out: list[str | None] = []
    for n, messages in enumerate(sent(store, calls)):
        assert messages[-1] == {"role": "user", "content": TURNS[n]}
        before = messages[-2] if len(messages) > 1 else None
        out.append(before["content"] if before and before["role"] == "user" else None)
    return out


@pytest.mark.parametrize(("every", "on"), [(3, {4, 7, 10}), (1, set(range(2, 11))),
                                           (4, {5, 9}), (20, set())])
def test_the_goal_is_in_the_tail_on_exactly_the_scheduled_turns(
        store: SQLiteStore, every: int, on: set[int]) -> None:
    engine = Engine(store, ScriptedModel(), system=SYSTEM, providers=[GoalReminder(every)])
    cid, calls = play(engine)
    assert tails(store, calls) == [TAG + GOAL if n in on else None for n in range(1, 11)]
    recorded = [i for i in store.history(cid) if i.kind is ItemKind.CONTEXT]
    assert [i.content["turn"] for i in recorded] == sorted(on)
    assert all(i.content["why"] == [f"every {every} turns"] for i in recorded)


def test_the_policy_or_both_are_restated(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel(), system=SYSTEM,
                    providers=[GoalReminder(2, what="both")])
    _, calls = play(engine, TURNS[:3])
    assert tails(store, calls)[2] == (
        f"{TAG}{GOAL}\n\n[the system prompt's policy, restated]\n{SYSTEM}")
    policy = Engine(store, ScriptedModel(), system=SYSTEM,
                    providers=[GoalReminder(2, what="policy")])
    _, calls = play(policy, TURNS[:3])
    assert tails(store, calls)[2] == f"[the system prompt's policy, restated]\n{SYSTEM}"
    # with no system prompt there is no policy to restate: nothing is recorded or shown
    bare = Engine(store, ScriptedModel(), providers=[GoalReminder(2, what="policy")])
    cid, calls = play(bare, TURNS[:3])
    assert tails(store, calls) == [None] * 3
    assert not any(i.kind is ItemKind.CONTEXT for i in store.history(cid))


class Monitor(Provider):
    """A stand-in for a trajectory monitor: asks for a reminder on turns it flags."""

    name = "monitor"

    def __init__(self, flagged: set[int]) -> None:
        self.flagged = flagged

    def gather(self, found: Gathering) -> NewItem | None:
        turn = sum(1 for i in found.history if i.kind is ItemKind.USER) + 1
        if turn in self.flagged:
            ask(found, f"drift at turn {turn}")
        return None


def test_a_reminder_is_shown_when_asked_for_and_says_why(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel(), system=SYSTEM,
                    providers=[Monitor({3}), GoalReminder(None)])
    cid, calls = play(engine, TURNS[:3])
    request_reminder(store, cid, "the monitor saw escalation")  # asks for the next turn
    more = [engine.run_turn(text, conversation_id=cid,
                            options=[Remind("the caller asked")] if n == 6 else [])
            for n, text in enumerate(TURNS[3:7], 4)]
    calls += [r.call.id for r in more]
    assert [n for n, t in enumerate(tails(store, calls), 1) if t is not None] == [3, 4, 6]
    assert all(t is None or t == TAG + GOAL for t in tails(store, calls))
    why = {i.content["turn"]: i.content["why"] for i in store.history(cid)
           if i.kind is ItemKind.CONTEXT}
    assert why == {3: ["asked: drift at turn 3"], 4: ["asked: the monitor saw escalation"],
                   6: ["asked: the caller asked"]}


Run = tuple[list[list[dict[str, Any]]], list[Any]]  # each call's messages, each call


def plain_and(tmp_path: Any, reminder: GoalReminder) -> tuple[Run, Run]:
    """The same conversation without a reminder and with ``reminder``."""
    runs = []
    for arm, providers in (("plain", []), ("reminded", [reminder])):
        store = SQLiteStore(tmp_path / f"{arm}.db")
        # the reply depends on the new message alone (the echo counts the tail's message)
        model = ScriptedModel(default=lambda r: f"A plan for: {r.messages[-1].content}")
        _, calls = play(Engine(store, model, system=SYSTEM, providers=providers))
        runs.append((sent(store, calls), [store.call(c) for c in calls]))
        store.close()
    return runs[0], runs[1]


def test_a_kept_reminder_stays_in_place_and_every_request_extends_the_last(
        tmp_path: Any) -> None:
    """The same conversation with and without the (kept) reminder: every request is the
    plain one with the reminders shown so far, each just above its turn's user message;
    every request begins with the whole previous one, so the reminder costs the cache
    nothing but its own tokens."""
    (plain, plain_calls), (ours, our_calls) = plain_and(tmp_path,
                                                        GoalReminder(3, what="both"))
    reminder = TAG + GOAL + f"\n\n[the system prompt's policy, restated]\n{SYSTEM}"
    for n, (mine, theirs) in enumerate(zip(ours, plain, strict=True)):
        shown = [m for m in mine if m not in theirs]
        assert shown == [{"role": "user", "content": reminder}] * len(
            [t for t in (4, 7, 10) if t <= n + 1])  # turns 4, 7 and 10, kept from then on
        assert [m for m in mine if m in theirs] == theirs
        if n:
            assert mine[:len(ours[n - 1])] == ours[n - 1]  # the whole previous request
    for mine in our_calls[1:]:
        report = dict(mine.prefix or {})
        assert report["expected"] and report["cause"] == "append_only", report
    for mine, theirs in zip(our_calls[1:], plain_calls[1:], strict=True):
        # the previous request and its reply, whole, reminders included
        assert mine.usage.cached_tokens >= theirs.usage.cached_tokens


def test_a_reminder_in_the_tail_only_never_moves_the_cached_prefix(tmp_path: Any) -> None:
    """With ``kept=False``, the same conversation with and without the reminder: every
    request is the plain one with at most the tail added, every prefix report is expected,
    everything above the previous request's tail is reused, and the reuse the model reported
    is within one user message a reminder turn of the plain run's."""
    (plain, plain_calls), (ours, our_calls) = plain_and(
        tmp_path, GoalReminder(3, what="both", kept=False))
    reminded = {n for n, messages in enumerate(ours)
                if len(messages) > 1 and messages[-2]["role"] == "user"}
    assert reminded == {3, 6, 9}  # turns 4, 7, 10
    for n, (mine, theirs) in enumerate(zip(ours, plain, strict=True)):
        assert [m for m in mine if m not in theirs] == ([mine[-2]] if n in reminded else [])
        assert [m for m in mine if m in theirs] == theirs
    for n, (mine, theirs) in enumerate(zip(our_calls, plain_calls, strict=True)):
        if n == 0:
            continue
        report, plain_report = dict(mine.prefix or {}), dict(theirs.prefix or {})
        assert report["expected"] and plain_report["expected"], report
        if n - 1 in reminded:  # what the previous tail held is not re-sent: reuse stops there
            above = len(ours[n - 1]) - 2
            assert report["divergence"]["message"] >= above
            assert mine.usage.cached_tokens < theirs.usage.cached_tokens
        else:  # the previous request was the plain one: reuse is the plain run's, exactly
            assert report["reused_bytes"] == plain_report["reused_bytes"]
            assert mine.usage.cached_tokens == theirs.usage.cached_tokens
    ratio = sum(c.usage.cached_tokens for c in our_calls) / sum(
        c.usage.cached_tokens for c in plain_calls)
    assert ratio >= 0.9, ratio


def test_the_schedule_counts_turns_in_the_log_through_a_compaction(store: SQLiteStore) -> None:
    from threadline.compaction.auto import Compaction

    engine = Engine(store, ScriptedModel(), providers=[GoalReminder(3)])
    cid, calls = play(engine, TURNS[:5])
    assert Compaction().compact(engine, cid, strategy="window", budget=60).applied
    more = [engine.run_turn(t, conversation_id=cid).call.id for t in TURNS[5:7]]
    assert [t for t in tails(store, [*calls, *more])] == [
        TAG + GOAL if n in (4, 7) else None for n in range(1, 8)]


def test_standard_engine_and_settings_switch_it_on() -> None:
    settings = Settings.from_env({"THREADLINE_HOME": "/tmp/x", "THREADLINE_REMIND_EVERY": "4",
                                  "THREADLINE_REMIND": "Both"})
    assert (settings.remind_every, settings.remind) == (4, "both")
    assert Settings.from_env({"THREADLINE_HOME": "/tmp/x"}).remind_every is None


def test_standard_engine_places_it_last(store: SQLiteStore) -> None:
    engine = standard_engine(store, ScriptedModel(), remind_every=2, remind="policy")
    (reminder,) = [p for p in engine.providers if isinstance(p, GoalReminder)]
    assert engine.providers[-1] is reminder and (reminder.every, reminder.what) == (2, "policy")
    asked = standard_engine(store, ScriptedModel(), remind_on_request=True)
    assert isinstance(asked.providers[-1], GoalReminder) and asked.providers[-1].every is None
    assert not any(isinstance(p, GoalReminder)
                   for p in standard_engine(store, ScriptedModel()).providers)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"every": 0}, "positive number of turns; got 0"),
    ({"every": True}, "positive number of turns"),
    ({"what": "persona"}, "restates one of: goal, policy, both; got 'persona'"),
])
def test_a_bad_reminder_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        GoalReminder(**kwargs)


def test_bad_settings_and_requests_are_refused(store: SQLiteStore) -> None:
    with pytest.raises(InputError, match="THREADLINE_REMIND must be goal, policy or both"):
        Settings.from_env({"THREADLINE_HOME": "/tmp/x", "THREADLINE_REMIND": "always"})
    with pytest.raises(InputError, match="THREADLINE_REMIND_EVERY must be a positive"):
        Settings.from_env({"THREADLINE_HOME": "/tmp/x", "THREADLINE_REMIND_EVERY": "0"})
    cid = Engine(store, ScriptedModel()).run_turn("Hi").conversation_id
    with pytest.raises(InputError, match="a reminder request needs a reason"):
        request_reminder(store, cid, "  ")
    with pytest.raises(InputError, match="no context provider of this engine reads a Remind"):
        Engine(store, ScriptedModel()).run_turn("Hi", options=[Remind()])


def test_the_monitor_settings_are_off_by_default_and_read_from_the_environment() -> None:
    base = Settings.from_env({"THREADLINE_HOME": "/tmp/x"})
    assert base.monitor is False and base.monitor_embeddings is None
    on = Settings.from_env({"THREADLINE_HOME": "/tmp/x", "THREADLINE_MONITOR": "1",
                            "THREADLINE_MONITOR_EMBEDDINGS": "0"})
    assert on.monitor is True and on.monitor_embeddings is False


def test_the_standard_engine_puts_the_monitor_first_and_its_guard_in_the_harness(
        tmp_path: Any) -> None:
    from threadline.providers.monitor import RuleDetector, TrajectoryMonitor

    store = SQLiteStore(tmp_path / "m.db")
    monitor = TrajectoryMonitor([RuleDetector()])
    engine = standard_engine(store, ScriptedModel(), monitor=monitor)
    assert engine.providers[0] is monitor
    assert any(isinstance(p, GoalReminder) for p in engine.providers)  # it asks for one
    assert monitor.guard in engine.toolbox.limits.guards
    plain = standard_engine(store, ScriptedModel())
    assert not any(isinstance(p, (TrajectoryMonitor, GoalReminder)) for p in plain.providers)
    assert plain.toolbox.limits.guards == ()
    store.close()
