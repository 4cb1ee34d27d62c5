"""Threadline: durable, prompt-cache-aware multi-turn LLM conversations.

The turn pipeline is ``Engine.run_turn``: ingest → assemble → call → commit, over a
:class:`Store` (SQLite by default) and a :class:`ModelBackend` (llama.cpp by default), with
context providers, turn hooks and a compactor plugged in; :func:`standard_engine` plugs in
threadline's own.
"""

from threadline.calls import ModelCall, Rendering, SentRequest, Timings, Usage
from threadline.compaction.auto import Compaction
from threadline.compaction.compact import Compacted
from threadline.compaction.constraints import Constraint
from threadline.compaction.plan import Plan, Policy
from threadline.compaction.working_state import WorkingState
from threadline.engine import Engine
from threadline.errors import ThreadlineError
from threadline.items import Branch, Conversation, Item, ItemKind, NewItem
from threadline.models import ModelBackend, ScriptedModel, create_model
from threadline.request import Message, Request, Segment, SegmentKind, Stability, ToolSpec
from threadline.settings import Durability, Settings
from threadline.standard import standard_engine
from threadline.stores import SQLiteStore, Store, open_store
from threadline.turn.assemble import assemble
from threadline.turn.delegate import Agent, Delegated, Delegation
from threadline.turn.hooks import TurnEvent, TurnHook
from threadline.turn.input import TurnInput
from threadline.turn.providers import ContextProvider, Gathering, Provider
from threadline.turn.result import TurnResult
from threadline.turn.tools import Tool, ToolContext, ToolLimits, ToolOutput
from threadline.version import __version__

__all__ = [
    "Agent",
    "Branch",
    "Compacted",
    "Compaction",
    "Constraint",
    "ContextProvider",
    "Conversation",
    "Delegated",
    "Delegation",
    "Durability",
    "Engine",
    "Gathering",
    "Item",
    "ItemKind",
    "Message",
    "ModelBackend",
    "ModelCall",
    "NewItem",
    "Plan",
    "Policy",
    "Provider",
    "Rendering",
    "Request",
    "SQLiteStore",
    "ScriptedModel",
    "Segment",
    "SegmentKind",
    "SentRequest",
    "Settings",
    "Stability",
    "Store",
    "ThreadlineError",
    "Timings",
    "Tool",
    "ToolContext",
    "ToolLimits",
    "ToolOutput",
    "ToolSpec",
    "TurnEvent",
    "TurnHook",
    "TurnInput",
    "TurnResult",
    "Usage",
    "WorkingState",
    "__version__",
    "assemble",
    "create_model",
    "open_store",
    "standard_engine",
]
