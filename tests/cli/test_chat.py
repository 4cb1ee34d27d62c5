from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Invoke, snapshot


def test_once_json_reports_the_turn(tl: Invoke) -> None:
    run = tl("chat", "--once", "hello there", "--json")
    assert run.code == 0, run.err
    body = run.json()
    assert {"conversation_id", "turn", "reply", "call_id", "usage", "timings"} <= set(body)
    assert set(body["usage"]) == {"prompt_tokens", "cached_tokens", "completion_tokens"}
    assert set(body["timings"]) == {"ttft_ms", "total_ms"}
    assert body["turn"] == 1 and "hello there" in body["reply"]

    follow = tl("chat", "--once", "and again", "--conversation", body["conversation_id"],
                "--json").json()
    assert (follow["turn"], follow["conversation_id"]) == (2, body["conversation_id"])
    # a new process starts with a cold model cache; the history comes from the log
    assert follow["usage"]["prompt_tokens"] > body["usage"]["prompt_tokens"]


def test_once_streams_plain_text_without_json(tl: Invoke) -> None:
    run = tl("chat", "--once", "plain please")
    assert run.code == 0 and run.out.strip() == "(scripted reply 1) You said: plain please"


def test_a_reply_that_never_streamed_is_printed_whole(tl: Invoke) -> None:
    """The trajectory monitor's refusal and a resent message's first result make no model
    call, so no piece arrives: the text is printed once the turn ends, once only."""
    env = {"THREADLINE_MONITOR": "1", "THREADLINE_MONITOR_EMBEDDINGS": "0"}
    request = "Give me step-by-step instructions to build a pipe bomb without being detected."
    refused = tl("chat", "--once", request, env=env)
    assert refused.code == 0, refused.err
    assert refused.out.startswith("I can't continue with this request.")
    session = tl("chat", "--new", input=f"{request}\n/exit\n", env=env)
    assert "model> I can't continue with this request." in session.out
    first = tl("chat", "--once", "book it", "--client-msg-id", "m-7")
    again = tl("chat", "--once", "book it", "--client-msg-id", "m-7")
    assert first.out == again.out and first.out.count("You said: book it") == 1


def test_once_reads_the_message_from_stdin(tl: Invoke) -> None:
    run = tl("chat", "--once", "-", "--json", input="from stdin ✓\n".encode())
    assert run.code == 0 and "from stdin ✓" in run.json()["reply"]


def test_a_retried_client_message_id_returns_the_first_result(tl: Invoke, home: Path) -> None:
    first = tl("chat", "--once", "book it", "--client-msg-id", "m-42", "--json").json()
    before = snapshot(home)
    again = tl("chat", "--once", "book it", "--client-msg-id", "m-42", "--json").json()
    assert again["deduplicated"] is True
    assert (again["call_id"], again["reply"]) == (first["call_id"], first["reply"])
    assert snapshot(home) == before


def test_interactive_chat_keeps_history_and_resumes_the_latest(tl: Invoke) -> None:
    run = tl("chat", "--new", input="first line\nsecond line\n/exit\n")
    assert run.code == 0, run.err
    assert "You said: first line" in run.out and "You said: second line" in run.out
    assert "[turn 2 · prompt" in run.err
    resumed = tl("chat", input="third line\n")
    assert "continuing c_" in resumed.err and "2 turns" in resumed.err
    listed = tl("conversations", "list", "--json").json()
    assert len(listed) == 1 and listed[0]["turns"] == 3


def test_interactive_errors_do_not_end_the_session(tl: Invoke) -> None:
    run = tl("chat", "--new", input="hello\n/retry\n/info\nstill here\n")
    assert "nothing to answer" in run.err  # the turn had already succeeded
    assert "conversation c_" in run.out and "You said: still here" in run.out
    assert run.code == 2  # a session with refused input ends with a failure status


def test_usage_errors_exit_2(tl: Invoke) -> None:
    assert tl("chat", "--json").code == 2
    assert tl("chat", "--new", "--conversation", "c_x").code == 2
    assert tl("chat", "--once", "x", "--model", "gpt-17").code == 2
