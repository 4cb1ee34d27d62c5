"""``threadline eval n1``: real transcripts replayed N-1 under two settings, recorded, judged,
reported with paired statistics, re-scored without a model call; bad input refused with
exit 2 and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from threadline.errors import ContextWindowExceeded
from threadline.eval.multiturn import backends
from threadline.eval.multiturn.backends import EvalModel
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.request import Request
from threadline.stores.sqlite import SQLiteStore

TRANSCRIPTS = Path(__file__).parents[1] / "eval" / "data" / "n1_transcripts.jsonl"


def _model(request: Request) -> str:
    """An assistant that keeps the rules only when they are in front of it, and a judge
    that says yes to French."""
    said = "\n".join(m.content for m in request.messages if isinstance(m.content, str))
    if said.startswith("Read a user's message"):
        return "Yes" if "Bonjour" in said.split("Assistant's reply:")[1] else "No"
    if "Standing instructions the user gave earlier" in said:
        return "- Bonjour, la réponse est dans la liste.\n- Et voilà les deux."
    return "Unfortunately, the answer is Rome."


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends.BACKENDS, "scripted", lambda settings, config: EvalModel(
        ScriptedModel(default=_model)))


def _config(tmp_path: Path, extra: str = "", judge: str = "model", **n1: str) -> Path:
    lines = [f'transcripts = "{TRANSCRIPTS}"', 'split = "all"',
             *(f"{k} = {v}" for k, v in n1.items())]
    path = tmp_path / "n1.toml"
    path.write_text("[n1]\n" + "\n".join(lines) + '\n[model]\nbackend = "scripted"\n'
                    '[a]\nname = "plain"\n[b]\nname = "reminder"\nreminder = "constraints"\n'
                    f'[judge]\nkind = "{judge}"\n[metrics]\nbootstrap = 200\n' + extra)
    return path


def test_a_run_records_replies_judges_them_and_compares_a_with_b(
        tl: Invoke, home: Path, tmp_path: Path, scripted: None) -> None:
    done = tl("eval", "n1", str(_config(tmp_path)), "--id", "first", "--json")
    assert done.code == 0, done.err
    report = done.json()
    run_dir = home / "eval" / "first"
    for name in ("run.json", "conversations.json", "trials.jsonl", "threadline.db",
                 "report.json", "tables.txt", "config.toml"):
        assert (run_dir / name).is_file(), name
    assert report["kind"] == "n1" and report["transcripts"] == 2 and report["replies"] == 4
    assert report["errors"] == 0 and report["changed"] == 0
    plain, kept = report["by_setting"]["plain"], report["by_setting"]["reminder"]
    # french: the language; bullets: a list, and never "unfortunately" → 3 items a side.
    # A keeps no rule (it never sees them again); B, with the rules in its tail, keeps all
    assert (plain["passed"], plain["graded"]) == (0, 3)
    assert (kept["passed"], kept["graded"]) == (3, 3)
    paired = report["paired"]
    assert paired["difference"]["value"] == pytest.approx(1.0)
    assert paired["sign_test"] == {"b_higher": 2, "a_higher": 0, "ties": 0, "p": 0.5}
    assert paired["mcnemar_all_pass"]["only_b"] == 2
    assert report["paired_rules"]["items"] == 3  # every item here has a rule
    kinds = {row["kind"]: row for row in report["by_kind"]}
    assert kinds["language"]["a"]["value"] == 0.0 and kinds["language"]["b"]["value"] == 1.0
    # the judge agrees with the language rule on both replies
    assert kept["judge_agreement"]["items"] == 3
    original = report["original"]
    assert original["transcripts"] == 2 and original["items"] == 3
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "finished" and manifest["judge"]["model"] == "scripted"
    assert manifest["judge"]["prompt_hash"].startswith("b2:")
    assert manifest["selection"]["no_rubric"] == 2
    lines = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert [(r["transcript"], r["setting"]) for r in lines] == [
        ("french_0", "plain"), ("french_0", "reminder"), ("bullets_0", "plain"),
        ("bullets_0", "reminder")]
    assert lines[0]["seed"] == lines[1]["seed"]  # paired: one seed for A and B
    assert all(len(r["judged"]) == len(r["graded"]) for r in lines)

    listed = tl("eval", "runs", "--json").json()
    assert [(r["id"], r["conditions"], r["arms"], r["trials"]) for r in listed] == [
        ("first", ["n-1"], ["plain", "reminder"], 4)]
    shown = tl("eval", "report", "first", "--json")
    assert shown.code == 0 and shown.json() == report
    text = tl("eval", "report", "first").out
    assert "B - A" in text and "language" in text and "McNemar" in text


def test_the_reply_is_an_ordinary_conversation_with_its_call(
        tl: Invoke, home: Path, tmp_path: Path, scripted: None) -> None:
    assert tl("eval", "n1", str(_config(tmp_path, judge="none")), "--id", "c").code == 0
    lines = [json.loads(line) for line in
             (home / "eval" / "c" / "trials.jsonl").read_text().splitlines()]
    store = SQLiteStore(home / "eval" / "c" / "threadline.db")
    try:
        for line in lines:
            history = store.history(line["conversation_id"])
            # the transcript's two fixed turns as written, then the last message and reply
            said = (ItemKind.USER, ItemKind.ASSISTANT)
            assert [i.kind for i in history if i.kind in said] == [*said, *said]
            assert history[-1].seq == line["reply_seq"]
            calls = store.calls(line["conversation_id"])
            assert [c.id for c in calls] == [line["call_id"]]  # only the last turn was called
            assert store.call(line["call_id"]).request is not None
        plain, kept = (store.call(lines[i]["call_id"]).request for i in (0, 1))
        assert plain is not None and kept is not None
        assert "Standing instructions" in json.dumps(kept.to_json())  # B's tail, not A's
        assert "Standing instructions" not in json.dumps(plain.to_json())
    finally:
        store.close()
    assert all(line["judged"] == [] for line in lines)
    report = json.loads((home / "eval" / "c" / "report.json").read_text())
    assert report["by_setting"]["plain"]["judge_agreement"]["items"] == 0


def test_rescore_makes_no_model_call_and_comes_out_identical(
        tl: Invoke, tmp_path: Path, scripted: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tl("eval", "n1", str(_config(tmp_path)), "--id", "r").code == 0

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
    assert summary["trials"] == 4


@pytest.mark.parametrize(("body", "message"), [
    ('[n1]\nsplit = "all"\n[a]\n[b]\nreminder = "x"\n', "n1.transcripts is missing"),
    ('[n1]\ntranscripts = "nowhere.jsonl"\n[a]\n[b]\nreminder = "x"\n', "which is not a file"),
    ('[n1]\ntranscripts = "{t}"\ncolour = 1\n[a]\n[b]\nreminder = "x"\n',
     "n1.colour is not a key"),
    ('[n1]\ntranscripts = "{t}"\n[a]\n', "[b] is missing"),
    ('[n1]\ntranscripts = "{t}"\n[a]\n[b]\n', "is the same setting as [a]"),
    ('[n1]\ntranscripts = "{t}"\n[a]\nname = "x"\n[b]\nname = "x"\nreminder = "y"\n',
     "need two names"),
    ('[n1]\ntranscripts = "{t}"\n[a]\narm = "nope"\n[b]\nreminder = "x"\n', "names 'nope'"),
    ('[n1]\ntranscripts = "{t}"\nformat = "csv"\n[a]\n[b]\nreminder = "x"\n',
     "n1.format names 'csv'"),
    ('[n1]\ntranscripts = "{t}"\nlimit = 0\n[a]\n[b]\nreminder = "x"\n',
     "n1.limit must be at least 1"),
    ('[n1]\ntranscripts = "{t}"\n[a]\n[b]\nreminder = "x"\n[judge]\nkind = "oracle"\n',
     "judge.kind names 'oracle'"),
    ('[n1]\ntranscripts = "{t}"\n[a]\n[b]\nreminder = "x"\n[judge]\nbackend = "local"\n',
     "judge.backend is for kind"),
    ('[n1]\ntranscripts = "{t}"\n[a]\n[b]\nreminder = "x"\n[run]\nk = 1\n',
     "[run] is not a section of an N-1 config"),
    ('[n1]\ntranscripts = "{t}"\nsplit = "all"\nids = ["nobody"]\n[a]\n[b]\nreminder = "x"\n',
     "none is left by the filter"),
    ("[n1\n", "is not valid TOML"),
])
def test_a_bad_config_is_refused_and_nothing_is_written(
        tl: Invoke, home: Path, tmp_path: Path, scripted: None, body: str,
        message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body.replace("{t}", str(TRANSCRIPTS)) + '[model]\nbackend = "scripted"\n')
    done = tl("eval", "n1", str(path), "--id", "bad")
    assert done.code == 2, (done.out, done.err)
    assert message in done.err
    assert not (home / "eval" / "bad").exists()


def test_a_malformed_transcript_file_is_refused(tl: Invoke, home: Path, tmp_path: Path,
                                                scripted: None) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "x", "conversations": [{"from": "alien", "value": "hi"}]}\n')
    path = tmp_path / "n1.toml"
    path.write_text(f'[n1]\ntranscripts = "{broken}"\n[model]\nbackend = "scripted"\n'
                    '[a]\n[b]\nreminder = "constraints"\n')
    done = tl("eval", "n1", str(path), "--id", "m")
    assert done.code == 2
    assert "holds no usable sharegpt transcript" in done.err and "alien" in done.err
    assert not (home / "eval" / "m").exists()
    missing = tl("eval", "n1", str(tmp_path / "absent.toml"))
    assert missing.code == 2 and "cannot read the config" in missing.err


def test_a_failed_turn_is_recorded_and_fails_its_rubric(
        tl: Invoke, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def model(request: Request) -> str:
        if "capital of Italy" in request.messages[-1].content:
            raise ContextWindowExceeded(9000, 8192, 96)
        return _model(request)
    monkeypatch.setitem(backends.BACKENDS, "scripted", lambda settings, config: EvalModel(
        ScriptedModel(default=model)))
    done = tl("eval", "n1", str(_config(tmp_path, judge="none")), "--id", "f", "--json")
    assert done.code == 0, done.err
    report = done.json()
    assert report["errors"] == 2  # french_0, under A and under B
    lines = [json.loads(line) for line in
             (home / "eval" / "f" / "trials.jsonl").read_text().splitlines()]
    failed = [r for r in lines if r["error"]]
    assert {r["transcript"] for r in failed} == {"french_0"}
    assert "ContextWindowExceeded" in failed[0]["error"]
    assert all(g["passed"] is False for r in failed for g in r["graded"])
    assert report["by_setting"]["reminder"]["passed"] == 2  # bullets_0's two items only
