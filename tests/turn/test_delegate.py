"""Delegation: a child conversation per task, whose dead ends never reach the parent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from threadline.engine import Engine
from threadline.errors import InputError, TurnCancelled
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel, ToolCalls
from threadline.request import Request
from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.verify import verify_conversation
from threadline.turn.children import delegations, descendants
from threadline.turn.delegate import (
    DELEGATE,
    DELEGATION_LOG,
    Agent,
    Delegation,
    bounded,
    child_id,
    parent_of,
)
from threadline.turn.lease import LeasePolicy
from threadline.turn.tools import Tool, ToolContext, ToolLimits, idempotency_key

RESEARCHER = "You are a researcher. Search, then answer in one sentence."
QUERY = {"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}}


def _system(request: Request) -> str:
    return next((m.content for m in request.messages if m.role == "system"), "")


def _last_user(request: Request) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


def _tool_results(request: Request) -> int:
    return sum(1 for m in request.messages if m.role == "tool")


def routed(parent: Callable[[Request], str | ToolCalls],
           child: Callable[[Request], str | ToolCalls]) -> ScriptedModel:
    """One scripted model for a parent and its children, answering each by its system
    prompt (calls from parallel children arrive in any order)."""
    return ScriptedModel(default=lambda r: child(r) if _system(r) == RESEARCHER else parent(r))


def explorer(searches: int) -> Callable[[Request], str | ToolCalls]:
    """A child that searches ``searches`` times (dead ends), then answers."""
    def reply(request: Request) -> str | ToolCalls:
        done = _tool_results(request)
        if done < searches:
            return ToolCalls.of(("search", {"q": f"{_last_user(request)} #{done}"}))
        return f"found it after {done} searches: {_last_user(request)[:40]}"
    return reply


def delegating(*tasks: str, then: str = "Here is what the sub-agents found.") -> Callable[
        [Request], str | ToolCalls]:
    """A parent that delegates ``tasks`` in one reply, then answers."""
    def reply(request: Request) -> str | ToolCalls:
        if _tool_results(request) == 0 and tasks:
            return ToolCalls.of(*((DELEGATE, {"agent": "researcher", "task": t})
                                  for t in tasks))
        return then
    return reply


class Searches:
    """A search tool whose results are long dead ends; records every run."""

    def __init__(self, gate: threading.Barrier | None = None,
                 fail_once: BaseException | None = None) -> None:
        self.runs: list[str] = []
        self.gate, self.fail_once = gate, fail_once
        self.lock = threading.Lock()

    def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        with self.lock:
            self.runs.append(str(arguments["q"]))
            failure, self.fail_once = self.fail_once, None
        if failure is not None:
            raise failure
        if self.gate is not None:
            self.gate.wait(5)
        return f"no match for {arguments['q']}: " + "irrelevant text " * 40


def researcher(search: Searches, **kwargs: Any) -> Agent:
    return Agent("researcher", "Finds facts in the archive.", RESEARCHER,
                 tools=[Tool("search", "Search the archive.", QUERY, search)], **kwargs)


def _roots(store: Store) -> list[str]:
    """The conversations no other delegated."""
    return [s.conversation.id for s in store.conversations()
            if parent_of(s.conversation) is None]


ON = Delegation()


def _engine(store: Store, model: ScriptedModel, search: Searches, *,
            delegation: Delegation | None = ON, **kwargs: Any) -> Engine:
    return Engine(store, model, agents=[researcher(search, **kwargs)], delegation=delegation,
                  lease=LeasePolicy(heartbeat_s=0.02))


def test_a_delegated_task_runs_in_a_child_and_only_its_answer_reaches_the_parent(
        store: SQLiteStore) -> None:
    search = Searches()
    model = routed(delegating("When was the archive founded?"), explorer(3))
    result = _engine(store, model, search).run_turn("Find when the archive was founded.")
    cid = result.conversation_id
    parent = store.history(cid)
    assert [str(i.kind) for i in parent] == ["user_message", "tool_call", "tool_result",
                                            "assistant_message"]
    found = parent[2].content
    shown = json.loads(found["output"])
    child = shown["child"]
    assert child == child_id(idempotency_key(cid, 1, parent[1].content["call_id"]))
    assert shown["answer"].startswith("found it after 3 searches") and not shown["truncated"]
    assert found["untrusted"] is True and found["details"]["child"] == child
    # the dead ends stay in the child: the parent's next request holds none of them
    last = model.requests[-1]
    assert _system(last) != RESEARCHER
    assert "irrelevant text" not in json.dumps(last.openai_messages())
    assert "untrusted" in last.openai_messages()[-1]["content"]  # fenced like any tool output
    kinds = [str(i.kind) for i in store.history(child)]
    assert kinds == ["user_message"] + ["tool_call", "tool_result"] * 3 + ["assistant_message"]
    assert store.conversation(child).system == RESEARCHER
    link = parent_of(store.conversation(child))
    assert link is not None and (link.conversation_id, link.turn, link.depth) == (cid, 1, 1)
    assert link.call_id == parent[1].content["call_id"] and link.root == cid
    # what the child spent is on the parent's record
    child_calls = store.calls(child)
    assert len(child_calls) == 4
    assert found["details"]["calls"] == 4
    assert found["details"]["prompt_tokens"] == sum(c.usage.prompt_tokens for c in child_calls)
    assert found["details"]["output_tokens"] == sum(c.usage.completion_tokens
                                                    for c in child_calls)
    assert [c.to_json()["status"] for c in delegations(store, cid)] == ["done"]
    assert verify_conversation(store, cid) == [] and verify_conversation(store, child) == []


def test_delegation_is_off_unless_the_conversation_allows_it(store: SQLiteStore) -> None:
    search = Searches()
    model = routed(delegating("task"), explorer(0))
    engine = _engine(store, model, search, delegation=None)
    result = engine.run_turn("Please delegate.")
    assert DELEGATE not in {t.name for t in model.requests[0].tools}
    refused = store.history(result.conversation_id)[2].content
    assert refused["is_error"] and "may not delegate" in refused["output"]
    assert descendants(store, result.conversation_id) == []
    # a conversation started with delegation on is offered the tools
    cid = engine.new_conversation(delegation=Delegation(max_depth=1, max_fanout=2))
    engine.run_turn("Please delegate.", conversation_id=cid)
    parents = [r for r in model.requests if _system(r) != RESEARCHER]
    offered = {t.name for t in parents[-2].tools}
    assert {DELEGATE, DELEGATION_LOG} <= offered
    assert [c.status for c in delegations(store, cid)] == ["done"]


def test_delegations_past_the_fanout_are_refused(store: SQLiteStore) -> None:
    model = routed(delegating("a", "b", "c"), explorer(0))
    engine = _engine(store, model, Searches(), delegation=Delegation(max_fanout=2))
    cid = engine.run_turn("three tasks").conversation_id
    results = [i.content for i in store.history(cid) if i.kind is ItemKind.TOOL_RESULT]
    assert [r["is_error"] for r in results] == [False, False, True]
    assert "at most 2 delegations a turn" in results[2]["output"]
    assert len(descendants(store, cid)) == 2


def test_a_child_delegates_further_only_within_the_depth_and_its_cost_rolls_up(
        store: SQLiteStore) -> None:
    def child(request: Request) -> str | ToolCalls:
        if _tool_results(request) == 0 and "deeper" in _last_user(request):
            return ToolCalls.of((DELEGATE, {"agent": "researcher", "task": "leaf task"}))
        return "leaf answer" if "leaf" in _last_user(request) else "middle answer"

    for depth, expected in ((1, 1), (2, 2)):
        model = routed(delegating("go deeper"), child)
        engine = _engine(store, model, Searches(), delegation=Delegation(max_depth=depth))
        cid = engine.run_turn("start").conversation_id
        below = descendants(store, cid)
        assert len(below) == expected
        middle = store.history(below[0])
        if depth == 1:  # the child was not offered the tool; its call was refused
            assert middle[2].content["is_error"]
            assert "may not delegate" in middle[2].content["output"]
            continue
        leaf = below[1]
        link = parent_of(store.conversation(leaf))
        assert link is not None and (link.depth, link.root) == (2, cid)
        details = store.history(cid)[2].content["details"]
        assert details["calls"] == len(store.calls(below[0])) + len(store.calls(leaf))


def test_parallel_children_run_together_and_return_in_the_order_asked(
        store: SQLiteStore) -> None:
    gate = threading.Barrier(2)  # each child's search waits for the other's: together or never
    search = Searches(gate=gate)
    model = routed(delegating("first task", "second task"), explorer(1))
    cid = _engine(store, model, search).run_turn("two tasks").conversation_id
    results = [json.loads(i.content["output"]) for i in store.history(cid)
               if i.kind is ItemKind.TOOL_RESULT]
    assert [r["answer"].split(": ", 1)[1] for r in results] == ["first task", "second task"]
    assert not gate.broken


def test_a_long_answer_is_cut_to_the_agents_result_tokens(store: SQLiteStore) -> None:
    model = routed(delegating("summarise"), lambda r: "word " * 500)
    engine = _engine(store, model, Searches(), result_tokens=40)
    cid = engine.run_turn("go").conversation_id
    shown = json.loads(store.history(cid)[2].content["output"])
    assert shown["truncated"] and engine.count(shown["answer"]) <= 40
    assert store.history(cid)[2].content["details"]["truncated"] is True
    text, cut = bounded("a b c", 100, engine.count)
    assert (text, cut) == ("a b c", False)


def test_a_crash_inside_a_child_resumes_running_only_what_never_ran(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    search = Searches(fail_once=KeyboardInterrupt())  # the process "dies" in a child's tool
    model = routed(delegating("find it"), explorer(2))
    engine = _engine(SQLiteStore(db), model, search)
    with pytest.raises(KeyboardInterrupt):
        engine.run_turn("go", client_msg_id="m1")
    store = SQLiteStore(db)  # a new process
    [cid] = _roots(store)
    child = descendants(store, cid)[0]
    assert [str(i.kind) for i in store.history(child)] == ["user_message", "tool_call"]
    assert delegations(store, cid)[0].status == "unfinished"
    runs_before = len(search.runs)
    fresh = _engine(store, routed(delegating("find it"), explorer(2)), search)
    result = fresh.answer(cid)
    assert result.reply.text == "Here is what the sub-agents found."
    assert len(search.runs) == runs_before + 2  # the interrupted search, then the second one
    kinds = [str(i.kind) for i in store.history(child)]
    assert kinds == ["user_message"] + ["tool_call", "tool_result"] * 2 + ["assistant_message"]
    assert [c.status for c in delegations(store, cid)] == ["done"]
    assert len(descendants(store, cid)) == 1  # the same child, not a second one


def test_a_child_that_finished_before_the_crash_is_not_run_again(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = SQLiteStore(db)
    original = store.commit
    fired: list[bool] = []

    def dying_commit(commit: Any) -> Any:  # the process dies as the parent records the result
        if not fired and any(i.kind is ItemKind.TOOL_RESULT and i.content.get("tool") ==
                             DELEGATE for i in commit.items):
            fired.append(True)
            raise KeyboardInterrupt
        return original(commit)

    store.commit = dying_commit  # type: ignore[method-assign]
    model = routed(delegating("find it"), explorer(1))
    with pytest.raises(KeyboardInterrupt):
        _engine(store, model, Searches()).run_turn("go")
    fresh_store = SQLiteStore(db)
    [cid] = _roots(fresh_store)
    child = descendants(fresh_store, cid)[0]
    child_calls = len(fresh_store.calls(child))
    fresh_model = routed(delegating("find it"), explorer(1))
    fresh_model_calls: list[str] = []
    counting = fresh_model.complete

    def complete(request: Request, **kwargs: Any) -> Any:
        fresh_model_calls.append(_system(request))
        return counting(request, **kwargs)

    fresh_model.complete = complete  # type: ignore[method-assign]
    _engine(fresh_store, fresh_model, Searches()).answer(cid)
    assert RESEARCHER not in fresh_model_calls  # the child's recorded answer came back
    assert len(fresh_store.calls(child)) == child_calls
    assert [c.status for c in delegations(fresh_store, cid)] == ["done"]


def test_cancelling_the_parent_turn_cancels_its_children(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = SQLiteStore(db)
    lease = LeasePolicy(heartbeat_s=0.02)
    model = ScriptedModel(default=lambda r: ("slow words " * 400) if _system(r) == RESEARCHER
                          else delegating("a", "b")(r), token_delay_s=0.002)
    engine = Engine(store, model, agents=[researcher(Searches())], delegation=Delegation(),
                    lease=lease)
    cid = engine.new_conversation()
    outcome: list[BaseException] = []

    def first() -> None:
        try:
            engine.run_turn("two tasks", conversation_id=cid)
        except BaseException as err:  # the cancel, checked below
            outcome.append(err)

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 10
    while len(descendants(store, cid)) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # the children are streaming
    other = Engine(SQLiteStore(db), ScriptedModel(default=lambda r: "next"), lease=lease)
    late = other.run_turn("stop that", conversation_id=cid, on_busy="cancel")
    thread.join(10)
    assert outcome and isinstance(outcome[0], TurnCancelled)
    assert late.reply.text == "next"
    results = [i.content for i in store.history(cid) if i.kind is ItemKind.TOOL_RESULT]
    assert len(results) == 2 and all("cancelled" in r["output"] for r in results)
    for child in descendants(store, cid):  # each child stopped mid-answer, and says so
        [call] = store.calls(child)
        assert str(call.status) == "failed" and "cancelled" in (call.error or "")
        assert store.history(child)[-1].kind is ItemKind.USER


def test_delegation_from_code_links_the_child_and_is_idempotent(store: SQLiteStore) -> None:
    model = routed(lambda r: "parent reply", explorer(1))
    engine = _engine(store, model, Searches(), delegation=None)
    cid = engine.run_turn("hello").conversation_id
    done = engine.delegate(cid, "look this up", agent="researcher", client_msg_id="job-1")
    assert done.answer.startswith("found it after 1 searches") and done.calls == 2
    again = engine.delegate(cid, "look this up", agent="researcher", client_msg_id="job-1")
    assert again == done and len(store.calls(done.child_id)) == 2
    other = engine.run_turn("another").conversation_id  # the same client id elsewhere
    elsewhere = engine.delegate(other, "look this up", agent="researcher",
                                client_msg_id="job-1")
    assert elsewhere.child_id != done.child_id
    notes = [i for i in store.history(cid) if i.kind is ItemKind.NOTE]
    assert len(notes) == 1 and notes[0].content["delegation"]["child"] == done.child_id
    link = parent_of(store.conversation(done.child_id))
    assert link is not None and link.call_id is None and link.turn == 1
    assert [c.child_id for c in delegations(store, cid)] == [done.child_id]
    # the parent's model is never shown the note
    engine.run_turn("and now?", conversation_id=cid)
    assert "delegated to" not in json.dumps(model.requests[-1].openai_messages())
    with pytest.raises(InputError, match="no agent named 'writer'"):
        engine.delegate(cid, "x", agent="writer")


def test_the_parent_reads_a_childs_log_and_no_other_conversation(store: SQLiteStore) -> None:
    asked: list[str] = []

    def parent(request: Request) -> str | ToolCalls:
        done = _tool_results(request)
        if _last_user(request) == "unrelated":
            return "ok"
        if done == 0:
            return ToolCalls.of((DELEGATE, {"agent": "researcher", "task": "find x"}))
        if done == 1:
            child = json.loads(request.messages[-1].content.split("\n", 1)[1].rsplit(
                "\n", 1)[0])["child"]
            asked.append(child)
            return ToolCalls.of((DELEGATION_LOG, {"child": child}),
                                (DELEGATION_LOG, {"child": stranger}))
        return "done"

    engine = _engine(store, routed(parent, explorer(1)), Searches())
    stranger = engine.run_turn("unrelated").conversation_id
    cid = engine.run_turn("read the log").conversation_id
    results = [i.content for i in store.history(cid) if i.kind is ItemKind.TOOL_RESULT]
    log, refused = results[1], results[2]
    assert not log["is_error"] and "tool call search" in log["output"]
    assert "irrelevant text" in log["output"]  # the whole log, dead ends and all
    assert refused["is_error"] and "not a sub-agent conversation of this one" in \
        refused["output"]


def test_children_of_one_agent_share_their_prefix_and_cache_key(store: SQLiteStore) -> None:
    model = routed(delegating("first", "second"), explorer(0))
    cid = _engine(store, model, Searches()).run_turn("go").conversation_id
    first, second = (r for r in model.requests if _system(r) == RESEARCHER)
    assert first.cache_key == second.cache_key
    assert first.openai_messages()[0] == second.openai_messages()[0]  # the system prompt
    assert first.tools == second.tools
    parent_key = next(r for r in model.requests if _system(r) != RESEARCHER).cache_key
    assert parent_key != first.cache_key
    assert len(descendants(store, cid)) == 2


def test_bad_agent_definitions_are_refused(store: SQLiteStore) -> None:
    with pytest.raises(InputError, match="invalid agent name"):
        Agent("Bad Name", "x", "y")
    with pytest.raises(InputError, match="result_tokens"):
        Agent("ok", "x", "y", result_tokens=2)
    with pytest.raises(InputError, match="threadline's own tools"):
        Agent("ok", "x", "y", tools=[Tool(DELEGATE, "d", QUERY, lambda a, c: "")])
    with pytest.raises(InputError, match="out of range"):
        Delegation(max_depth=0)
    with pytest.raises(InputError, match="two agents"):
        Engine(store, ScriptedModel(),
               agents=[Agent("a", "x", "y"), Agent("a", "x", "z")])


def test_a_childs_budget_is_its_agents(store: SQLiteStore) -> None:
    search = Searches()
    model = routed(delegating("explore forever"), explorer(100))
    engine = _engine(store, model, search, limits=ToolLimits(max_rounds=2))
    cid = engine.run_turn("go").conversation_id
    child = descendants(store, cid)[0]
    assert len(search.runs) == 2  # two rounds of tools, then it had to answer
    assert len(store.calls(child)) == 3
    assert store.calls(child)[-1].request is None  # listed: the request is not carried


def test_a_child_that_runs_long_compacts_in_its_own_log(store: SQLiteStore) -> None:
    from threadline.compaction.plan import Policy
    from threadline.standard import standard_engine

    model = routed(delegating("explore"), explorer(8))
    engine = standard_engine(store, model, agents=[researcher(Searches())], delegation=ON,
                             policy=Policy(high_water=900, low_water=400, profile="none",
                                           keep_tool_results=1, clear_at_least=100))
    cid = engine.run_turn("go").conversation_id
    child = descendants(store, cid)[0]
    assert any(i.kind is ItemKind.COMPACTION for i in store.history(child))
    assert not any(i.kind is ItemKind.COMPACTION for i in store.history(cid))
    assert store.history(child)[-1].kind is ItemKind.ASSISTANT
    assert verify_conversation(store, child) == []


def test_a_delegation_from_code_with_bad_input_writes_nothing(store: SQLiteStore) -> None:
    from threadline.errors import UnknownConversation

    engine = _engine(store, routed(lambda r: "ok", explorer(0)), Searches(), delegation=None)
    cid = engine.run_turn("hello").conversation_id
    before = [s.conversation.id for s in store.conversations()]
    with pytest.raises(UnknownConversation):
        engine.delegate("c_missing", "task", agent="researcher")
    with pytest.raises(InputError, match="no agent named"):
        engine.delegate(cid, "task", agent="nobody")
    with pytest.raises(InputError):
        engine.delegate(cid, "x" * (engine.max_message_bytes + 1), agent="researcher")
    with pytest.raises(InputError):
        engine.delegate(cid, "   ", agent="researcher")
    assert [s.conversation.id for s in store.conversations()] == before
    assert len(store.history(cid)) == 2


def test_where_an_agent_can_change_the_world_delegations_run_one_at_a_time(
        store: SQLiteStore) -> None:
    running: list[int] = []
    overlap: list[int] = []

    def book(arguments: Mapping[str, Any], context: ToolContext) -> str:
        running.append(1)
        overlap.append(len(running))
        time.sleep(0.05)
        running.pop()
        return "booked"

    booker = Agent("researcher", "Books things.", RESEARCHER,
                   tools=[Tool("search", "Book.", QUERY, book, side_effect=True)])
    model = routed(delegating("first", "second"), explorer(1))
    engine = Engine(store, model, agents=[booker], delegation=ON)
    tool = engine.toolbox.tool(DELEGATE)
    assert isinstance(tool, Tool) and tool.side_effect
    cid = engine.run_turn("book two").conversation_id
    assert overlap == [1, 1]  # one child at a time
    results = [i.content for i in store.history(cid) if i.kind is ItemKind.TOOL_RESULT]
    assert [r["side_effect"] for r in results] == [True, True]
    reader = Engine(store, model, agents=[researcher(Searches())])
    assert not reader.toolbox.tool(DELEGATE).side_effect  # type: ignore[union-attr]
