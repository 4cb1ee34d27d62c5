"""A recorded log with every kind of call replay meets: several turns, retrieval and memory
recall in the tail, a tool call, a failed call and its retry, a compaction with its
constraint-extraction side call, a regenerate and an edit (forks), and the memory writer's
extraction side calls."""

from __future__ import annotations

import pytest

from threadline.compaction.extract import PROMPT as CONSTRAINTS_PROMPT
from threadline.compaction.plan import Policy
from threadline.engine import Engine
from threadline.errors import ModelCallFailed
from threadline.memory import MemoryStore, NewMemory
from threadline.memory.extract import PROMPT as FACTS_PROMPT
from threadline.memory.writer import MemoryWriter
from threadline.models.scripted import ScriptedModel, ToolCalls, echo_reply
from threadline.providers import CorpusSearch
from threadline.request import Request
from threadline.retrieval.corpus import Corpus, Document
from threadline.standard import standard_engine
from threadline.stores.base import Store
from threadline.turn.input import TurnInput
from threadline.turn.tools import Tool

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = Tool("weather", "The weather in a city.", CITY, lambda args, ctx: "rain, 14°C")
FILLER = " Details follow:" + " the shipment data is long" * 12

def answers(request: Request) -> str:
    """The scripted model's replies: a list for constraint extraction, facts for the memory
    writer, else an echo (deterministic, so a re-run gives the recorded answer)."""
    system = request.messages[0].content if request.messages else ""
    if system == CONSTRAINTS_PROMPT:
        return "- Always use British spelling."
    if system == FACTS_PROMPT:
        return '{"facts": [{"text": "I live in Oslo", "about": "home"}]}'
    return echo_reply(request)


def engine_for(store: Store, model: ScriptedModel) -> Engine:
    """The application's engine: recording and replaying use the same configuration."""
    return standard_engine(store, model, system="You are terse.", tools=[WEATHER],
                           corpora=Corpus(store), time_in_context=True,
                           reminders=["Answer in one sentence."], model_extraction=True,
                           policy=Policy(high_water=900, low_water=400, profile="none"))


def record(store: Store, conversation_id: str | None = None) -> str:
    """Record the fixture conversation in ``store`` (in ``conversation_id``, created before
    and still empty, or a new one); its id."""
    Corpus(store).add("notes", [Document("trip.md", "The Lisbon trip is booked for May.")])
    memory = MemoryStore(store)
    memory.add("ann", NewMemory("I am flying to Lisbon in May"))
    model = ScriptedModel(default=answers)
    engine = engine_for(store, model)
    first = engine.run_turn("Always use British spelling. Hello, I live in Oslo.",
                            user_id="ann", conversation_id=conversation_id)
    cid = first.conversation_id
    asked = engine.run_turn("When is the Lisbon trip?", conversation_id=cid, user_id="ann",
                            options=[CorpusSearch("notes")])
    model.enqueue(ToolCalls.of(("weather", {"city": "Lisbon"}), text="Let me look."))
    engine.run_turn("What is the weather in Lisbon?", conversation_id=cid)
    model.enqueue(RuntimeError("the server went away"))
    with pytest.raises(ModelCallFailed):
        engine.run_turn("Are you there?", conversation_id=cid)
    engine.answer(cid)  # the failed turn, answered again
    for n in range(8):  # past the high-water mark: a compaction, with its extraction call
        engine.run_turn(f"Turn {n}: check invoice INV-{n:03d} for FY2025.{FILLER}",
                        conversation_id=cid)
    engine.run_turn("And after that?", conversation_id=cid)
    engine.regenerate(cid, asked.message.seq, TurnInput(options=(CorpusSearch("notes"),)))
    engine.edit(cid, first.message.seq, "Hello again, from Oslo.")
    MemoryWriter(store, memory, model=model).run()
    return cid
