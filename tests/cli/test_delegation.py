"""The CLI shows a conversation's sub-agents: their links, their calls, their bill."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, snapshot
from tests.turn.test_delegate import Searches, delegating, explorer, researcher, routed
from threadline.engine import Engine
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.delegate import Delegation


def _delegated(home: Path) -> tuple[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(home / "threadline.db")
    model = routed(delegating("find the founding year"), explorer(2))
    engine = Engine(store, model, agents=[researcher(Searches())], delegation=Delegation())
    cid = engine.run_turn("When was it founded?").conversation_id
    child = store.history(cid)[2].content["details"]["child"]
    store.close()
    return cid, child


def test_conversations_show_names_the_parent_and_the_children(tl: Invoke, home: Path) -> None:
    cid, child = _delegated(home)
    parent = tl("conversations", "show", cid)
    assert parent.code == 0 and f"child {child} (researcher, turn 1): done · 3 calls" in \
        parent.out
    shown = tl("conversations", "show", child, "--json").json()
    assert shown["parent"]["conversation_id"] == cid and shown["parent"]["depth"] == 1
    assert shown["children"] == []
    assert f"sub-agent researcher of {cid}" in tl("conversations", "show", child).out
    listed = tl("conversations", "show", cid, "--json").json()["children"]
    assert [c["child"] for c in listed] == [child] and listed[0]["calls"] == 3


def test_calls_and_the_cache_report_roll_the_children_up(tl: Invoke, home: Path) -> None:
    cid, child = _delegated(home)
    own = tl("calls", "list", cid, "--json").json()
    every = tl("calls", "list", cid, "--children", "--json").json()
    assert len(own) == 2 and len(every) == 5
    assert [c["conversation_id"] for c in every[2:]] == [child] * 3
    text = tl("calls", "list", cid, "--children").out
    assert text.splitlines()[0].split()[:2] == ["CHILD", "CALL"]
    assert "own: 2 calls" in text and "delegated: 3 calls" in text
    report = tl("cache", "report", cid, "--children", "--json").json()
    [below] = report["children"]
    assert below["conversation_id"] == child and below["calls"] == 3
    assert report["total_cost_usd"] == round(report["cost_usd"] + below["cost_usd"], 6)
    assert "children" not in tl("cache", "report", cid, "--json").json()
    assert "with its sub-agents: $" in tl("cache", "report", cid, "--children").out


AGENTS = "tests.cli.agents_fixture:AGENTS"


def test_the_cli_engine_delegates_to_the_agents_the_settings_name(tl: Invoke) -> None:
    for spec in (AGENTS, "tests.cli.agents_fixture:agents"):
        env = {"THREADLINE_AGENTS": spec, "THREADLINE_DELEGATION": "2,3"}
        cid = tl("chat", "--once", "hello", "--json", env=env).json()["conversation_id"]
        shown = tl("conversations", "show", cid, "--json").json()
        assert shown["conversation"]["metadata"]["delegation"] == {"max_depth": 2,
                                                                   "max_fanout": 3}
    plain = tl("chat", "--once", "hello", "--json", env={"THREADLINE_AGENTS": AGENTS}).json()
    shown = tl("conversations", "show", plain["conversation_id"], "--json").json()
    assert "delegation" not in shown["conversation"]["metadata"]  # off unless asked for


@pytest.mark.parametrize(("env", "message"), [
    ({"THREADLINE_AGENTS": "no_such_module_here:AGENTS"}, "cannot import the agents' module"),
    ({"THREADLINE_AGENTS": "tests.cli.agents_fixture:MISSING"}, "has no 'MISSING'"),
    ({"THREADLINE_AGENTS": "tests.cli.agents_fixture:NOT_AGENTS"},
     "not a non-empty sequence of threadline.Agent"),
    ({"THREADLINE_AGENTS": "just-a-name"}, "must name a module and an attribute"),
    ({"THREADLINE_AGENTS": AGENTS, "THREADLINE_DELEGATION": "0,2"}, "positive integer"),
    ({"THREADLINE_DELEGATION": "1,2"}, "no agents to delegate to"),
])
def test_bad_agent_settings_are_refused_and_change_nothing(tl: Invoke, home: Path,
                                                           env: dict[str, str],
                                                           message: str) -> None:
    tl("chat", "--once", "first", "--json")
    before = snapshot(home)
    run = tl("chat", "--once", "hello", env=env)
    assert run.code != 0 and message in run.err
    assert snapshot(home) == before


def test_deleting_a_conversation_deletes_its_sub_agents_conversations(tl: Invoke,
                                                                       home: Path) -> None:
    cid, child = _delegated(home)
    kept = tl("chat", "--once", "unrelated", "--json").json()["conversation_id"]
    refused = tl("conversations", "delete", cid, input="n\n")
    assert refused.code != 0 and "its 1 sub-agent conversation(s)" in refused.err + \
        refused.out
    assert tl("conversations", "show", child).code == 0  # nothing deleted yet
    done = tl("conversations", "delete", cid, "--yes", "--json").json()
    assert done["deleted"] == cid and done["children"] == [child]
    assert tl("conversations", "show", child).code == 3
    assert tl("conversations", "show", cid).code == 3
    assert tl("conversations", "show", kept).code == 0
