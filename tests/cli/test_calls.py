from __future__ import annotations

from tests.cli.conftest import Invoke


def test_calls_list_and_show(tl: Invoke) -> None:
    first = tl("chat", "--once", "hello", "--json").json()
    cid = first["conversation_id"]
    second = tl("chat", "--once", "again", "--conversation", cid, "--json").json()
    listed = tl("calls", "list", cid, "--json").json()
    assert [c["call_id"] for c in listed] == [first["call_id"], second["call_id"]]
    assert "request" not in listed[0] and listed[1]["turn"] == 2
    assert tl("calls", "list", cid).out.splitlines()[0].split()[:4] == [
        "CALL", "BRANCH", "TURN", "STATUS"]
    shown = tl("calls", "show", second["call_id"])
    assert shown.code == 0 and "turn 2" in shown.out and "(see it with --request)" in shown.out


def test_show_request_prints_the_exact_bytes_sent(tl: Invoke) -> None:
    first = tl("chat", "--once", "héllo ✓", "--json").json()
    second = tl("chat", "--once", "again", "--conversation", first["conversation_id"],
                "--json").json()
    record = tl("calls", "show", second["call_id"], "--json").json()
    raw = tl("calls", "show", second["call_id"], "--request").result.stdout_bytes
    assert raw == record["request"]["prompt"].encode("utf-8")
    assert raw == ("<|im_start|>user\nhéllo ✓<|im_end|>\n<|im_start|>assistant\n"
                   f"{first['reply']}<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n"
                   "<|im_start|>assistant\n").encode()
    assert record["request"]["messages"][-1] == {"role": "user", "content": "again"}
    assert record["reply_seq"] == second["reply_seq"] and record["status"] == "ok"
