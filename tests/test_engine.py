"""The turn pipeline end to end with the scripted model: durability, retries, forks."""

from __future__ import annotations

import pytest

from threadline.calls import CallStatus
from threadline.engine import Engine
from threadline.errors import (
    ClientMessageConflict,
    ContextWindowExceeded,
    EmptyMessage,
    InputError,
    MessageTooLarge,
    ModelCallFailed,
    TurnSuperseded,
)
from threadline.items import ItemKind, NewItem
from threadline.models.scripted import ScriptedModel
from threadline.providers.clock import TimeProvider
from threadline.request import Request
from threadline.stores.base import Commit
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.verify import verify_conversation
from threadline.turn.input import TurnInput


def _kinds(store: SQLiteStore, cid: str, branch: str = "main") -> list[str]:
    return [str(i.kind) for i in store.history(cid, branch)]


def test_turns_append_and_the_model_sees_the_whole_branch(engine: Engine,
                                                          store: SQLiteStore,
                                                          model: ScriptedModel) -> None:
    first = engine.run_turn("My name is Ada.")
    second = engine.run_turn("What is my name?", conversation_id=first.conversation_id)
    assert (first.turn, second.turn) == (1, 2)
    assert [m["content"] for m in model.requests[-1].openai_messages()] == [
        "My name is Ada.", first.reply.text, "What is my name?"]
    assert _kinds(store, first.conversation_id) == [
        "user_message", "assistant_message", "user_message", "assistant_message"]
    assert verify_conversation(store, first.conversation_id) == []


def test_the_recorded_request_is_what_the_model_was_sent(engine: Engine, store: SQLiteStore,
                                                         model: ScriptedModel) -> None:
    first = engine.run_turn("one")
    result = engine.run_turn("two", conversation_id=first.conversation_id)
    call = store.call(result.call.id)
    assert call.request is not None
    assert list(call.request.messages) == model.requests[-1].openai_messages()
    assert call.request.prompt is not None and call.request.prompt.endswith(
        "<|im_start|>user\ntwo<|im_end|>\n<|im_start|>assistant\n")
    assert (call.head_seq, call.reply_seq, call.turn) == (3, 4, 2)
    assert call.usage.cached_tokens > 0  # turn 2 re-sends turn 1's exact prefix


def test_the_message_is_durable_before_the_model_is_called(store: SQLiteStore) -> None:
    seen: list[list[str]] = []

    def look_at_the_store(request: Request) -> str:
        conversation = store.conversations()[0].conversation.id
        seen.append([i.text for i in store.history(conversation)])
        return "ok"

    Engine(store, ScriptedModel(default=look_at_the_store)).run_turn("remember me")
    assert seen == [["remember me"]]


def test_a_failed_call_is_recorded_and_retried_without_duplicating(store: SQLiteStore) -> None:
    model = ScriptedModel([RuntimeError("backend exploded"), "second time lucky"])
    engine = Engine(store, model)
    with pytest.raises(ModelCallFailed, match="backend exploded") as failure:
        engine.run_turn("hello", client_msg_id="msg-1")
    cid = store.conversations()[0].conversation.id
    assert _kinds(store, cid) == ["user_message"]
    failed = store.call(failure.value.call_id)
    assert (failed.status, failed.reply_seq) == (CallStatus.FAILED, None)
    assert failed.error is not None and "backend exploded" in failed.error

    retried = engine.run_turn("hello", client_msg_id="msg-1")
    assert retried.reply.text == "second time lucky" and not retried.deduplicated
    assert _kinds(store, cid) == ["user_message", "assistant_message"]
    assert [c.status for c in store.calls(cid)] == [CallStatus.FAILED, CallStatus.OK]


def test_answer_retries_a_failed_turn_without_a_client_id(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel([TimeoutError("slow"), "done"]))
    with pytest.raises(ModelCallFailed):
        engine.run_turn("hello")
    cid = store.conversations()[0].conversation.id
    assert engine.answer(cid).reply.text == "done"
    assert _kinds(store, cid) == ["user_message", "assistant_message"]
    with pytest.raises(InputError, match="nothing to answer"):
        engine.answer(cid)


def test_a_retried_send_returns_the_first_result_and_writes_nothing(
        engine: Engine, store: SQLiteStore, model: ScriptedModel) -> None:
    first = engine.run_turn("book the flight", client_msg_id="abc")
    calls_before = len(model.requests)
    again = engine.run_turn("book the flight", client_msg_id="abc")
    assert again.deduplicated and len(model.requests) == calls_before
    assert (again.reply.seq, again.call.id) == (first.reply.seq, first.call.id)
    assert again.to_json()["reply"] == first.to_json()["reply"]
    assert len(store.history(first.conversation_id)) == 2
    assert len(store.calls(first.conversation_id)) == 1


def test_a_retry_of_a_message_answered_by_a_later_turn_returns_that_reply(
        store: SQLiteStore) -> None:
    # the first turn never got its reply (here its call failed; a crashed holder is the same),
    # and the next sender's turn answered with it in view
    engine = Engine(store, ScriptedModel([RuntimeError("holder died"), "both answered"]))
    with pytest.raises(ModelCallFailed):
        engine.run_turn("book the flight", client_msg_id="m-1")
    cid = store.conversations()[0].conversation.id
    later = engine.run_turn("and a hotel", conversation_id=cid)
    retried = engine.run_turn("book the flight", conversation_id=cid, client_msg_id="m-1")
    assert retried.deduplicated and retried.reply.seq == later.reply.seq
    assert _kinds(store, cid) == ["user_message", "user_message", "assistant_message"]


def test_a_client_id_reused_for_another_message_is_refused(engine: Engine,
                                                           store: SQLiteStore) -> None:
    first = engine.run_turn("book the flight", client_msg_id="abc")
    with pytest.raises(ClientMessageConflict):
        engine.run_turn("cancel the flight", client_msg_id="abc")
    other = engine.run_turn("a different conversation")
    with pytest.raises(ClientMessageConflict):
        engine.run_turn("book the flight", client_msg_id="abc",
                        conversation_id=other.conversation_id)
    assert len(store.history(first.conversation_id)) == 2
    assert len(store.history(other.conversation_id)) == 2


@pytest.mark.parametrize(("text", "error"), [("", EmptyMessage), ("  \n\t ", EmptyMessage),
                                             ("x" * 101, MessageTooLarge),
                                             ("bad \udcff surrogate", InputError)])
def test_bad_messages_change_nothing(store: SQLiteStore, text: str,
                                     error: type[Exception]) -> None:
    engine = Engine(store, ScriptedModel(), max_message_bytes=100)
    existing = engine.run_turn("fine")
    with pytest.raises(error):
        engine.run_turn(text, conversation_id=existing.conversation_id)
    with pytest.raises(error):
        engine.run_turn(text)
    assert len(store.conversations()) == 1
    assert len(store.history(existing.conversation_id)) == 2


def test_a_reply_is_not_appended_when_the_branch_moved(store: SQLiteStore) -> None:
    def interleave(request: Request) -> str:
        # another writer appends to the branch while this call is running
        cid = store.conversations()[0].conversation.id
        head = store.head(cid)
        assert head is not None
        store.commit(Commit(conversation_id=cid, created_at=head.created_at,
                            expected_head=head.seq, items=[NewItem.user("meanwhile")]))
        return "too late"

    with pytest.raises(TurnSuperseded):
        Engine(store, ScriptedModel(default=interleave)).run_turn("first")
    cid = store.conversations()[0].conversation.id
    assert [i.text for i in store.history(cid)] == ["first", "meanwhile"]
    (call,) = store.calls(cid)
    assert call.status is CallStatus.FAILED and call.error is not None
    assert call.error.startswith("superseded")


def test_a_message_that_follows_a_head_is_refused_once_the_head_moved(engine: Engine,
                                                                     store: SQLiteStore) -> None:
    first = engine.run_turn("first")
    cid = first.conversation_id
    engine.run_turn("meanwhile", conversation_id=cid)
    with pytest.raises(TurnSuperseded):
        engine.run_turn(TurnInput("after first", cid, follows=first.reply.seq))
    assert [i.text for i in store.history(cid)][0::2] == ["first", "meanwhile"]
    head = store.head(cid)
    assert head is not None
    followed = engine.run_turn(TurnInput("after meanwhile", cid, follows=head.seq))
    assert followed.message.parent_seq == head.seq


def test_cancelling_mid_stream_records_the_turn_as_failed(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel(["a long reply that gets interrupted"]))

    def interrupt(piece: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.run_turn("hello", on_text=interrupt)
    cid = store.conversations()[0].conversation.id
    assert _kinds(store, cid) == ["user_message"]
    assert [c.status for c in store.calls(cid)] == [CallStatus.FAILED]


def test_model_errors_keep_their_message_and_are_recorded(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel([ContextWindowExceeded(9000, 8192, 256)]))
    with pytest.raises(ContextWindowExceeded, match="8,192-token context window"):
        engine.run_turn("hello")
    cid = store.conversations()[0].conversation.id
    assert [c.status for c in store.calls(cid)] == [CallStatus.FAILED]


def test_edit_forks_and_keeps_the_original(engine: Engine, store: SQLiteStore) -> None:
    first = engine.run_turn("I live in Paris.")
    second = engine.run_turn("Where do I live?", conversation_id=first.conversation_id)
    edited = engine.edit(first.conversation_id, second.message.seq, "Where do I work?")
    assert edited.branch != "main"
    assert [i.text for i in store.history(first.conversation_id, edited.branch)][-2:] == [
        "Where do I work?", edited.reply.text]
    assert [i.text for i in store.history(first.conversation_id)] == [
        "I live in Paris.", first.reply.text, "Where do I live?", second.reply.text]
    with pytest.raises(InputError, match="not a user message"):
        engine.edit(first.conversation_id, first.reply.seq, "nope")


def test_editing_the_first_message_starts_a_root_branch(engine: Engine,
                                                        store: SQLiteStore) -> None:
    first = engine.run_turn("hello")
    edited = engine.edit(first.conversation_id, first.message.seq, "hi there")
    assert [i.kind for i in store.history(first.conversation_id, edited.branch)] == [
        ItemKind.USER, ItemKind.ASSISTANT]
    assert store.history(first.conversation_id, edited.branch)[0].text == "hi there"


def test_regenerate_answers_again_on_a_new_branch(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel(["first answer", "second answer"]))
    first = engine.run_turn("Tell me a joke.")
    again = engine.regenerate(first.conversation_id, first.reply.seq)
    assert again.reply.text == "second answer" and again.message.seq == first.message.seq
    assert [i.text for i in store.history(first.conversation_id, again.branch)] == [
        "Tell me a joke.", "second answer"]
    assert [i.text for i in store.history(first.conversation_id)] == [
        "Tell me a joke.", "first answer"]
    assert again.call.usage.cached_tokens > 0  # the fork re-sends the same prefix


def test_the_time_goes_in_the_tail_and_never_breaks_the_prefix(store: SQLiteStore) -> None:
    from datetime import UTC, datetime, timedelta

    ticks = iter(datetime(2026, 5, 3, 9, 0, tzinfo=UTC) + timedelta(minutes=m)
                 for m in range(100))
    engine = Engine(store, ScriptedModel(), providers=[TimeProvider()],
                    clock=lambda: next(ticks))
    first = engine.run_turn("What time is it?")
    second = engine.run_turn("And now?", conversation_id=first.conversation_id)
    sent = store.call(second.call.id).request
    assert sent is not None and sent.messages[-2]["content"].startswith("[current time]\n2026-")
    assert second.call.prefix is not None
    assert second.call.prefix["cause"] == "tail_replaced" and second.call.prefix["expected"]
