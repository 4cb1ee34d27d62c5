"""``threadline eval run|report|rescore|runs``: a run recorded, re-scored without a model
call, reproducible from its config; a bad config refused with exit 2 and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from threadline.eval.multiturn import backends
from threadline.eval.multiturn.backends import EvalModel
from threadline.models.scripted import ScriptedModel
from threadline.request import Request

TASKS = Path(__file__).parents[1] / "eval" / "data" / "sharded_tasks.json"


def _knows_the_answers(request: Request) -> str:
    said = request.messages[-1].content
    if "all but 4" in said:
        return "So the baker sold **56** loaves."
    if "3 days" in said:
        return "[weather.get(city='Oslo', days=3), weather.get(city='Bergen', days=3)]"
    if "even numbers" in said:
        return "```python\ndef evens(xs):\n    return [x for x in xs if x % 2 == 0]\n```"
    return "Could you tell me more?"


@pytest.fixture
def smart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends.BACKENDS, "scripted", lambda settings, config: EvalModel(
        ScriptedModel(default=_knows_the_answers)))


def _config(tmp_path: Path, extra: str = "", **run: str) -> Path:
    lines = [f'tasks = "{TASKS}"', "k = 3", 'conditions = ["full", "concat", "sharded", '
             '"recap", "snowball"]', *(f"{k} = {v}" for k, v in run.items())]
    path = tmp_path / "config.toml"
    path.write_text("[run]\n" + "\n".join(lines) + '\n[model]\nbackend = "scripted"\n'
                    "[metrics]\nbootstrap = 200\n" + extra)
    return path


def test_a_run_records_every_turn_and_reports(tl: Invoke, home: Path, tmp_path: Path,
                                              smart: None) -> None:
    done = tl("eval", "run", str(_config(tmp_path)), "--id", "first", "--json")
    assert done.code == 0, done.err
    report = done.json()
    run_dir = home / "eval" / "first"
    for name in ("run.json", "tasks.json", "trials.jsonl", "threadline.db", "report.json",
                 "tables.txt", "plots/score_by_turn.png", "plots/metrics.png",
                 "plots/response_types.png"):
        assert (run_dir / name).is_file(), name
    assert report["trials"] == 3 * 5 * 3 and report["errors"] == 0
    groups = {(g["condition"], g["kind"]): g for g in report["groups"]}
    # the scripted model answers once it has everything: SHARDED is right at the last shard
    assert groups[("sharded", "all")]["metrics"]["P"]["value"] == 1.0
    assert groups[("sharded", "math")]["by_turn"][-1]["value"] == 1.0
    assert groups[("sharded", "math")]["by_turn"][0]["value"] == 0.0
    assert groups[("full", "all")]["metrics"]["pass^3"]["value"] == 1.0
    shares = groups[("sharded", "all")]["response_types"]
    assert shares["clarification"]["value"] > 0.5
    assert groups[("full", "all")]["tokens"]["prompt"] > 0
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "finished"
    assert manifest["simulator"] == {"name": "shard-revealer", "version": "1"}
    assert manifest["unsupported"][0]["kind"] == "database"
    assert manifest["code_isolation"] in ("netns", "socket-guard")

    listed = tl("eval", "runs", "--json")
    assert listed.code == 0
    assert [(r["id"], r["status"], r["trials"]) for r in listed.json()] == [
        ("first", "finished", 45)]
    shown = tl("eval", "report", "first", "--json")
    assert shown.code == 0 and shown.json() == report
    assert "sharded" in tl("eval", "report", str(run_dir)).out


ARMS = """[run]
tasks = "{tasks}"
k = 3
conditions = ["full", "sharded"]
arms = ["plain", "compaction", "working-state", "recap", "goal", "tight"]
[model]
backend = "scripted"
[metrics]
bootstrap = 200
[arms.compaction]
conditions = ["sharded"]
[arms.working-state]
conditions = ["sharded"]
[arms.recap]
conditions = ["sharded"]
[arms.goal]
every = 1
conditions = ["sharded"]
[arms.tight]
kind = "compaction"
budget = 64
target = 32
conditions = ["sharded"]
"""


def test_arms_run_paired_against_plain_and_report_their_reuse(
        tl: Invoke, home: Path, tmp_path: Path, smart: None) -> None:
    config = tmp_path / "arms.toml"
    config.write_text(ARMS.format(tasks=TASKS))
    done = tl("eval", "run", str(config), "--id", "arms", "--json")
    assert done.code == 0, done.err
    report = done.json()
    # plain under both conditions, every other arm under SHARDED only: 3 tasks × 3 trials
    assert report["trials"] == 3 * 3 * (2 + 5) and report["errors"] == 0
    manifest = json.loads((home / "eval" / "arms" / "run.json").read_text())
    recorded = {a["name"]: a for a in manifest["arms"]}
    assert recorded["tight"]["kind"] == "compaction" and recorded["tight"]["params"] == {
        "budget": 64, "target": 32, "summarize": True}
    assert recorded["goal"] | {"engine": ""} == {
        "name": "goal", "kind": "goal", "version": "1", "params": {"every": 1},
        "conditions": ["sharded"], "engine": ""}
    assert recorded["plain"]["conditions"] == ["full", "sharded"]
    groups = {(g["condition"], g["arm"], g["kind"]): g for g in report["groups"]}
    assert ("full", "recap", "all") not in groups
    for arm in recorded:
        group = groups[("sharded", arm, "all")]
        assert group["tokens"]["reuse_ratio"] is not None
        assert group["prefix"]["unexpected"] == 0, (arm, group["prefix"])
    assert "compaction_reset" in groups[("sharded", "tight", "all")]["prefix"]["causes"]
    assert "tail_replaced" in groups[("sharded", "working-state", "all")]["prefix"]["causes"]
    assert set(groups[("sharded", "plain", "all")]["prefix"]["causes"]) == {
        "append_only", "first_call"}
    assert report["baseline"] == "plain"
    pairs = {(p["arm"], p["kind"]): p for p in report["paired"]}
    assert {arm for arm, kind in pairs if kind == "all"} == set(recorded) - {"plain"}
    recap = pairs[("recap", "all")]
    assert recap["condition"] == "sharded" and recap["baseline"] == "plain"
    assert recap["tasks"] == 3 and set(recap["delta"]) == {"P", "A90", "U90-10", "pass^1",
                                                           "pass^3"}
    assert recap["baseline_reuse_ratio"] == groups[("sharded", "plain", "all")]["tokens"][
        "reuse_ratio"]
    # the scripted model answers once it has every shard, with or without an arm
    assert recap["delta"]["P"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    text = (home / "eval" / "arms" / "tables.txt").read_text()
    assert "each arm against plain" in text and "working-state" in text
    again = tl("eval", "rescore", "arms", "--json")
    assert again.code == 0 and again.json()["identical"] is True


def test_rescore_makes_no_model_call_and_comes_out_identical(
        tl: Invoke, tmp_path: Path, smart: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tl("eval", "run", str(_config(tmp_path)), "--id", "r").code == 0

    def no_call(*args: object, **kwargs: object) -> object:
        raise AssertionError("a re-score must not call a model")
    monkeypatch.setattr(ScriptedModel, "complete", no_call)
    monkeypatch.setattr(ScriptedModel, "__init__", no_call)
    for name in list(backends.BACKENDS):
        monkeypatch.setitem(backends.BACKENDS, name, no_call)
    done = tl("eval", "rescore", "r", "--json")
    assert done.code == 0, done.err
    summary = done.json()
    assert summary["identical"] is True and summary["changed"] == 0


def test_a_run_is_reproducible_from_its_config(tl: Invoke, home: Path, tmp_path: Path,
                                              smart: None) -> None:
    config = _config(tmp_path, seed="11")
    one = tl("eval", "run", str(config), "--id", "one", "--json").json()
    two = tl("eval", "run", str(config), "--id", "two", "--json").json()
    def graded(report: dict[str, object]) -> list[tuple[object, ...]]:  # timings differ
        return [(g["condition"], g["kind"], g["metrics"], g["by_turn"], g["response_types"],
                 g["tokens"]) for g in report["groups"]]  # type: ignore[attr-defined]
    assert graded(one) == graded(two)

    def trials(name: str) -> list[tuple[object, ...]]:
        lines = (home / "eval" / name / "trials.jsonl").read_text().splitlines()
        return [(t["task_id"], t["condition"], t["trial"], t["seed"],
                 [(u["kind"], u["grade"]) for u in t["turns"]]) for t in map(json.loads, lines)]
    assert trials("one") == trials("two")


RUN = '[run]\ntasks = "{tasks}"\n'


def arm(name: str, table: str) -> str:
    return RUN + f'conditions = ["full", "sharded"]\narms = ["{name}"]\n[arms.{name}]\n' \
        f"{table}\n"


@pytest.mark.parametrize(("config", "message"), [
    ("[run]\nk = 3\n", "run.tasks is missing"),
    ('[run]\ntasks = "nowhere.json"\n', "which is not a file"),
    ("[run]\ntasks = \"{tasks}\"\nk = 0\n", "run.k must be at least 1"),
    ("[run]\ntasks = \"{tasks}\"\nconditions = [\"chatty\"]\n", "names 'chatty'"),
    (RUN + 'arms = ["chatty"]\n', "names 'chatty'; choose from plain, compaction"),
    (RUN + 'arms = ["a b"]\n', "an arm's name is letters"),
    (RUN + 'arms = []\n', "run.arms must be a non-empty list"),
    (arm("compaction", 'budget = "big"'), "arms.compaction.budget must be a int, not 'big'"),
    (arm("compaction", "budget = 10"), "arms.compaction.budget must be at least 64, not 10"),
    (arm("compaction", "budget = 500\ntarget = 500"),
     "arms.compaction.target must be below the budget (500), not 500"),
    (arm("compaction", "summarize = 1"), "arms.compaction.summarize must be a bool"),
    (arm("goal", "every = 0"), "arms.goal.every must be at least 1, not 0"),
    (arm("goal", "every = true"), "arms.goal.every must be a int"),
    (arm("goal", "often = 2"),
     "arms.goal.often is not a parameter of a goal arm; its keys are conditions, every, kind"),
    (arm("tight", 'kind = "zip"'), "arms.tight.kind names 'zip'; choose from plain"),
    (arm("recap", 'conditions = ["snowball"]'), "names 'snowball', which the run does not run"),
    (arm("recap", "conditions = []"), "arms.recap.conditions must be a non-empty list"),
    (RUN + 'arms = ["plain"]\n[arms.recap]\n', "[arms.recap] gives parameters to an arm"),
    (RUN + 'arms = ["recap"]\n[arms]\nrecap = 3\n', "arms.recap must be a table"),
    ("[run]\ntasks = \"{tasks}\"\ncolour = 1\n", "run.colour is not a key"),
    ("[run]\ntasks = \"{tasks}\"\n[modle]\n", "[modle] is not a section"),
    ("[run]\ntasks = \"{tasks}\"\n[model]\nbackend = \"gpt\"\n", "model.backend names 'gpt'"),
    ("[run]\ntasks = \"{tasks}\"\n[model]\nreply_tokens = \"many\"\n", "must be a int"),
    ("[run]\ntasks = \"{tasks}\"\n[simulator]\nversion = \"9\"\n", "simulator.version pins"),
    ("[run]\ntasks = \"{tasks}\"\n[judge]\nkind = \"gpt\"\n", "no judge is built yet"),
    ("[run]\ntasks = \"{tasks}\"\nids = [\"nope\"]\n", "keeps no task"),
    ("[run\n", "not valid TOML"),
])
def test_a_bad_config_exits_2_and_writes_nothing(tl: Invoke, home: Path, tmp_path: Path,
                                                 config: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(config.replace("{tasks}", str(TASKS)))
    done = tl("eval", "run", str(path))
    assert done.code == 2, done.out
    assert message in done.err and "error:" in done.err
    assert not (home / "eval").exists()


def test_a_run_id_in_use_is_refused(tl: Invoke, home: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, limit="1")
    assert tl("eval", "run", str(config), "--id", "same").code == 0
    before = (home / "eval" / "same" / "trials.jsonl").read_text()
    again = tl("eval", "run", str(config), "--id", "same")
    assert again.code == 2 and "already holds a run" in again.err
    assert (home / "eval" / "same" / "trials.jsonl").read_text() == before


def test_an_unknown_run_is_not_found(tl: Invoke) -> None:
    for command in ("report", "rescore"):
        done = tl("eval", command, "missing")
        assert done.code == 3 and "eval runs" in done.err
    assert tl("eval", "runs", "--json").json() == []
