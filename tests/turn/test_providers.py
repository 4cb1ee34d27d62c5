"""The context-provider seam: a provider the engine has never heard of plugs into a turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from threadline.engine import Engine
from threadline.errors import InputError
from threadline.items import Item, ItemKind, NewItem
from threadline.models.scripted import ScriptedModel
from threadline.request import TailBlock
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.input import TurnInput
from threadline.turn.providers import Gathering, Provider, this_turn


@dataclass(frozen=True)
class Weather:
    """This test's own per-turn option."""

    city: str


class WeatherProvider(Provider):
    """Defined only here: the forecast for the city a turn asks about."""

    name = "weather"
    options = (Weather,)

    def __init__(self) -> None:
        self.looked: list[tuple[str, int]] = []  # (city, items in the history it was shown)

    def check(self, turn: TurnInput) -> None:
        option = turn.option(Weather)
        if option is not None and not option.city.strip():
            raise InputError("a weather option needs a city")

    def gather(self, found: Gathering) -> NewItem | None:
        option = found.turn.option(Weather)
        if option is None:
            return None
        if option.city == "Atlantis":
            raise InputError("there is no weather in Atlantis")
        self.looked.append((option.city, len(found.history)))
        return self.context_item(text=f"{option.city}: 14 °C, light rain", city=option.city)

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        item = this_turn(self, history)
        return [] if item is None else [TailBlock("forecast", item.content["text"])]


def _engine(store: SQLiteStore, *providers: Provider,
            model: ScriptedModel | None = None) -> Engine:
    return Engine(store, model or ScriptedModel(), providers=providers)


def test_a_provider_defined_in_a_test_records_one_item_and_shows_it_in_the_tail(
        store: SQLiteStore) -> None:
    weather = WeatherProvider()
    model = ScriptedModel()
    engine = _engine(store, weather, model=model)
    first = engine.run_turn("Do I need an umbrella?", options=[Weather("Oslo")])
    history = store.history(first.conversation_id)
    assert [i.kind for i in history] == [ItemKind.USER, ItemKind.CONTEXT, ItemKind.ASSISTANT]
    found = history[1]
    assert found.parent_seq == first.message.seq
    assert found.content == {"provider": "weather", "text": "Oslo: 14 °C, light rain",
                             "city": "Oslo"}
    sent = model.requests[-1].openai_messages()
    assert sent[-2]["content"] == "[forecast]\nOslo: 14 °C, light rain"
    assert sent[-1]["content"] == "Do I need an umbrella?"
    # the next turn without the option shows no forecast: the tail is this turn's only
    second = engine.run_turn("Thanks.", conversation_id=first.conversation_id)
    assert all("forecast" not in m["content"] for m in model.requests[-1].openai_messages())
    assert second.call.prefix is not None and second.call.prefix["expected"]
    assert weather.looked == [("Oslo", 0)]


def test_a_provider_sees_the_history_before_the_message(store: SQLiteStore) -> None:
    weather = WeatherProvider()
    engine = _engine(store, weather)
    first = engine.run_turn("Hello")
    engine.run_turn("And in Bergen?", conversation_id=first.conversation_id,
                    options=[Weather("Bergen")])
    assert weather.looked == [("Bergen", 2)]  # hello and its reply; not the new message


def test_what_a_provider_refuses_writes_nothing(store: SQLiteStore) -> None:
    engine = _engine(store, WeatherProvider())
    first = engine.run_turn("Hello")
    before = store.history(first.conversation_id)
    for option in (Weather(" "), Weather("Atlantis")):  # refused by check, then by gather
        with pytest.raises(InputError):
            engine.run_turn("Weather?", conversation_id=first.conversation_id,
                            options=[option])
    with pytest.raises(InputError, match="no weather in Atlantis"):
        engine.run_turn("Weather?", options=[Weather("Atlantis")])
    assert store.history(first.conversation_id) == before
    assert len(store.conversations()) == 1


def test_an_option_no_provider_reads_and_a_user_without_memory_are_refused(
        store: SQLiteStore) -> None:
    engine = _engine(store)  # no providers, no hooks
    with pytest.raises(InputError, match="no context provider of this engine reads a Weather"):
        engine.run_turn("Weather?", options=[Weather("Oslo")])
    with pytest.raises(InputError, match="keeps no memory"):
        engine.run_turn("I live in Oslo.", user_id="ann")
    assert store.conversations() == []
    with pytest.raises(InputError, match="one Weather option"):
        TurnInput("x", options=(Weather("a"), Weather("b")))


def test_a_retried_message_keeps_what_its_first_try_recorded(store: SQLiteStore) -> None:
    weather = WeatherProvider()
    model = ScriptedModel([RuntimeError("provider down")])
    engine = _engine(store, weather, model=model)
    with pytest.raises(Exception, match="provider down"):
        engine.run_turn("Umbrella?", client_msg_id="m1", options=[Weather("Oslo")])
    [conversation] = store.conversations()
    cid = conversation.conversation.id
    result = engine.run_turn("Umbrella?", conversation_id=cid, client_msg_id="m1",
                             options=[Weather("Oslo")])
    kinds = [i.kind for i in store.history(cid)]
    assert kinds == [ItemKind.USER, ItemKind.CONTEXT, ItemKind.ASSISTANT]
    assert weather.looked == [("Oslo", 0)]  # the retry found it recorded: no second look
    assert "Oslo: 14 °C" in model.requests[-1].openai_messages()[-2]["content"]
    again = engine.run_turn("Umbrella?", conversation_id=cid, client_msg_id="m1",
                            options=[Weather("Oslo")])
    assert again.deduplicated and again.reply.seq == result.reply.seq


def test_edit_answer_and_regenerate_take_the_same_input(store: SQLiteStore) -> None:
    weather = WeatherProvider()
    model = ScriptedModel()
    engine = _engine(store, weather, model=model)
    first = engine.run_turn("Umbrella?")
    edited = engine.edit(first.conversation_id, first.message.seq,
                         TurnInput("Umbrella in Oslo?", options=(Weather("Oslo"),)))
    assert [i.kind for i in store.history(first.conversation_id, edited.branch)] == [
        ItemKind.USER, ItemKind.CONTEXT, ItemKind.ASSISTANT]
    again = engine.regenerate(first.conversation_id, edited.message.seq,
                              TurnInput(options=(Weather("Bergen"),)))
    history = store.history(first.conversation_id, again.branch)
    assert [i.kind for i in history] == [ItemKind.USER, ItemKind.CONTEXT, ItemKind.ASSISTANT]
    assert history[1].content["city"] == "Bergen"  # found anew on the new branch
    assert "Bergen" in model.requests[-1].openai_messages()[-2]["content"]
    with pytest.raises(InputError):
        engine.regenerate(first.conversation_id, first.message.seq, TurnInput("new text"))
    branches = len(store.branches(first.conversation_id))
    with pytest.raises(InputError, match="an edit needs the new text"):
        engine.edit(first.conversation_id, first.message.seq, TurnInput())
    assert len(store.branches(first.conversation_id)) == branches  # refused before the fork
    with pytest.raises(InputError):
        engine.answer(TurnInput("text", conversation_id=first.conversation_id))
    with pytest.raises(InputError, match="either a TurnInput or a text"):
        engine.run_turn(TurnInput("x"), conversation_id=first.conversation_id)


def test_two_providers_need_distinct_names(store: SQLiteStore) -> None:
    with pytest.raises(InputError, match="share a name"):
        _engine(store, WeatherProvider(), WeatherProvider())
