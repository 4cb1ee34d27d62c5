"""``threadline corpus``: answers from documents, and what is refused."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Invoke, snapshot


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "more").mkdir(parents=True, exist_ok=True)
    (docs / "y.md").write_text("Company Y reported cloud revenue of $12.4 billion in FY2025. "
                               "It was $10.5 billion in FY2024.\n")
    (docs / "more" / "z.txt").write_text("Company Z grew cloud revenue by 9% in FY2025.\n")
    (docs / "more" / "blob.txt").write_bytes(b"\x00\x01\x02")
    (docs / "more" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    return docs


def test_add_search_ask_and_delete(tl: Invoke, tmp_path: Path) -> None:
    added = tl("corpus", "add", "filings", str(_docs(tmp_path)), "--json")
    assert added.code == 0, added.err
    body = added.json()
    assert (body["documents"], len(body["skipped"])) == (2, 2)
    assert "binary" in added.err and "not UTF-8" in added.err
    listed = tl("corpus", "list", "--json").json()
    assert [(c["name"], c["documents"]) for c in listed] == [("filings", 2)]
    found = tl("corpus", "search", "filings", "cloud revenue FY2024", "--json").json()
    assert found[0]["source"].endswith("y.md")
    asked = tl("corpus", "ask", "filings", "What was Company Y's revenue in FY2025?", "--json")
    assert asked.code == 0, asked.err
    retrieval = asked.json()["retrieval"]
    assert retrieval["passages"][0]["source"].endswith("y.md")
    cid = asked.json()["conversation_id"]
    follow = tl("corpus", "ask", "filings", "--conversation", cid, "And the year before?",
                "--json").json()["retrieval"]
    assert "FY2024" in follow["query"] and "Company Y" in follow["query"]
    deleted = tl("corpus", "delete", "filings", "--yes")
    assert deleted.code == 0 and deleted.out.strip() == "deleted corpus filings (2 documents)"
    assert tl("corpus", "list", "--json").json() == []


def test_bad_corpus_input_is_refused_and_writes_nothing(tl: Invoke, tmp_path: Path,
                                                        home: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.md").write_text("   \n")
    refused = tl("corpus", "add", "filings", str(empty))
    assert refused.code == 2 and "nothing to add" in refused.err and "empty" in refused.err
    assert tl("corpus", "list", "--json").json() == []
    unknown = tl("corpus", "ask", "nope", "cloud revenue?")
    assert unknown.code == 3 and "no corpus named 'nope'" in unknown.err
    assert tl("corpus", "add", "filings", str(_docs(tmp_path))).code == 0
    before = snapshot(home)
    stopwords = tl("corpus", "ask", "filings", "what is it and how was that?")
    assert stopwords.code == 2 and "no words to search for" in stopwords.err
    too_big = tl("corpus", "add", "filings", str(tmp_path / "docs" / "y.md"),
                 "--max-file-bytes", "10")
    assert too_big.code == 2 and "over the 10-byte limit" in too_big.err
    for args, code, message in [(("delete", "nope", "--yes"), 3, "no corpus named 'nope'"),
                                (("delete", "nope"), 3, "no corpus named 'nope'"),
                                (("delete", "filings"), 2, "pass --yes to confirm"),
                                (("search", "nope", "cloud"), 3, "no corpus named 'nope'")]:
        run = tl("corpus", *args)
        assert run.code == code and message in run.err, (args, run.err)
    assert snapshot(home) == before


def test_a_corpus_on_postgresql_answers_the_same_way(tl: Invoke, postgres_url: str,
                                                    tmp_path: Path) -> None:
    gone = tl("corpus", "delete", "nope", "--yes")
    assert gone.code == 3 and "no corpus named 'nope'" in gone.err
    pg = ("--database-url", postgres_url)
    assert tl(*pg, "corpus", "add", "filings", str(_docs(tmp_path))).code == 0
    assert [c["documents"] for c in tl(*pg, "corpus", "list", "--json").json()] == [2]
    found = tl(*pg, "corpus", "search", "filings", "cloud revenue FY2024", "--json").json()
    assert found[0]["source"].endswith("y.md")
    asked = tl(*pg, "corpus", "ask", "filings", "What was Company Y's revenue in FY2025?",
               "--json")
    assert asked.code == 0, asked.err
    assert asked.json()["retrieval"]["passages"][0]["source"].endswith("y.md")


def test_an_answer_is_reused_only_when_asked_and_the_old_flag_warns(tl: Invoke,
                                                                    tmp_path: Path) -> None:
    assert tl("corpus", "add", "filings", str(_docs(tmp_path))).code == 0
    question = "What was Company Y's revenue in FY2025?"
    first = tl("corpus", "ask", "filings", question, "--reuse-answers", "--json")
    assert first.code == 0 and first.json()["cached"] is None
    again = tl("corpus", "ask", "filings", question, "--reuse-answers", "--json")
    assert again.json()["cached"]["kind"] == "exact"
    assert again.json()["reply"] == first.json()["reply"]
    assert tl("corpus", "ask", "filings", question, "--json").json()["cached"] is None
    old = tl("corpus", "ask", "filings", question, "--cache", "--json")
    assert old.code == 0 and old.json()["cached"]["kind"] == "exact"
    assert old.err.splitlines()[0] == 'warning: "--cache" is deprecated; use "--reuse-answers"'
    assert "--cache" not in tl("corpus", "ask", "--help").out
