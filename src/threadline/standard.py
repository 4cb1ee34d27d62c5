"""The engine with threadline's own parts plugged in: what the CLI and the server run.

``Engine`` itself knows no feature; this is where they are chosen. In tail order:

    time           TimeProvider          with ``time_in_context``
    working state  WorkingStateProvider  always
    retrieval      RetrievalProvider     with ``corpora`` (also a hook: keeps answers to reuse)
    memory         MemoryProvider        when the store keeps memory and ``recall`` is on
    reminders      ReminderProvider      one per text in ``reminders``
    goal reminder  GoalReminder          with ``remind_every`` (the goal and/or the policy,
                                         ``remind``), or ``remind_on_request``, or the
                                         monitor (which asks for it)

and first of all, with ``monitor``, the TrajectoryMonitor (``providers/monitor/``), whose
tool guard joins the harness's (``ToolLimits.guards``);

plus the ``MemoryQueue`` hook when the store keeps memory, then ``hooks``, and compaction
(``compaction.Compaction``: automatic under ``policy``, manual always).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from threadline.compaction.auto import Compaction
from threadline.compaction.constraint_classifier import ClassifiedDetector
from threadline.compaction.constraints import Detector, detect
from threadline.compaction.plan import Policy
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.hooks.memory_queue import MemoryQueue
from threadline.items import utc_now
from threadline.memory.recall import MemoryRecall
from threadline.memory.store import MemoryStore
from threadline.models.base import ModelBackend
from threadline.providers import (
    GoalReminder,
    MemoryProvider,
    ReminderProvider,
    RetrievalProvider,
    TimeProvider,
    WorkingStateProvider,
)
from threadline.providers.monitor import (
    ModelClassifier,
    RuleDetector,
    TrajectoryMonitor,
    embedding_detector,
)
from threadline.request import ToolSpec
from threadline.retrieval import dense
from threadline.retrieval.corpus import Corpus
from threadline.rewrite import DEFAULT_DEADLINE_S
from threadline.settings import DEFAULT_MAX_MESSAGE_BYTES
from threadline.stores.base import Store
from threadline.turn.delegate import Agent, Delegation
from threadline.turn.hooks import TurnHook
from threadline.turn.lease import DEFAULT_LEASE, LeasePolicy
from threadline.turn.observe import Observer
from threadline.turn.providers import ContextProvider
from threadline.turn.tools import Tool, ToolLimits
from threadline.turn.trace import Tracer

log = logging.getLogger("threadline.compaction")


def standard_engine(store: Store, model: ModelBackend, *, system: str | None = None,
                    tools: Sequence[Tool | ToolSpec] = (), tool_limits: ToolLimits | None = None,
                    corpora: Corpus | None = None, recall: MemoryRecall | bool = True,
                    time_in_context: bool = False, reminders: Sequence[str] = (),
                    remind_every: int | None = None, remind: str = "goal",
                    remind_on_request: bool = False,
                    monitor: TrajectoryMonitor | bool = False,
                    policy: Policy | None = None, model_extraction: bool = False,
                    constraints: Detector = detect,
                    providers: Sequence[ContextProvider] = (), hooks: Sequence[TurnHook] = (),
                    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                    lease: LeasePolicy = DEFAULT_LEASE, count: Callable[[str], int] | None = None,
                    rewrite_deadline_s: float = DEFAULT_DEADLINE_S,
                    observer: Observer | None = None, tracer: Tracer | None = None,
                    clock: Callable[[], datetime] = utc_now, agents: Sequence[Agent] = (),
                    delegation: Delegation | None = None) -> Engine:
    """An engine over ``store`` and ``model`` with the standard providers and hooks, then
    ``providers`` and ``hooks`` of the caller's. ``recall`` may be a configured
    :class:`MemoryRecall`; False turns recall off (turns sent with a user are still queued for
    the memory writer). ``constraints`` finds standing constraints before each compaction
    (the rules by default; see :func:`constraint_detector`). ``remind_every`` restates the
    conversation's goal (``remind``: "goal", "policy" or "both") in the tail every N turns;
    ``remind_on_request`` adds the reminder with no schedule, for a monitor to ask for
    (``providers/goal.py``). ``monitor`` (True: :func:`default_monitor`) judges every turn's
    trajectory first, asks for the goal and policy reminder, restricts the tools and refuses
    as its policy says (docs/safety.md). The other arguments are :class:`Engine`'s."""
    watch = default_monitor() if monitor is True else \
        monitor if isinstance(monitor, TrajectoryMonitor) else None
    parts: list[ContextProvider] = [watch] if watch is not None else []
    if time_in_context:
        parts.append(TimeProvider())
    parts.append(WorkingStateProvider())
    after: list[TurnHook] = [watch] if watch is not None else []  # it reads the reply too
    if corpora is not None:
        retrieval = RetrievalProvider(corpora, deadline_s=rewrite_deadline_s)
        parts.append(retrieval)
        after.append(retrieval)
    if store.memory is not None:
        if recall is not False:
            found = recall if isinstance(recall, MemoryRecall) else \
                MemoryRecall(MemoryStore(store, clock=clock))
            parts.append(MemoryProvider(found, deadline_s=rewrite_deadline_s))
        after.append(MemoryQueue(store))
    parts += [ReminderProvider(text, name="reminder" if len(reminders) == 1 else
                               f"reminder {n}") for n, text in enumerate(reminders, 1)]
    if remind_every is not None or remind_on_request or watch is not None:
        parts.append(GoalReminder(remind_every, what="both" if watch is not None
                                  and remind_every is None else remind))
    if watch is not None:
        limits = tool_limits or ToolLimits()
        tool_limits = replace(limits, guards=(*limits.guards, watch.guard))
    return Engine(store, model, system=system, tools=tools, tool_limits=tool_limits,
                  providers=[*parts, *providers], hooks=[*after, *hooks],
                  compactor=Compaction(policy, model_extraction=model_extraction,
                                       detector=constraints),
                  max_message_bytes=max_message_bytes, lease=lease, count=count,
                  observer=observer, tracer=tracer, clock=clock, agents=agents,
                  delegation=delegation)


def default_monitor(embeddings: bool | None = None, *, intent: bool | None = None,
                    classifier: ModelBackend | None = None,
                    reach: float = 0.0) -> TrajectoryMonitor:
    """The trajectory monitor with the rules and, where the dense extra is installed (always
    when ``embeddings``; refused without it), the embedding detector; with ``classifier``,
    the model classifier asking that model too. The embedding detector runs its intent
    classifier unless ``intent`` is False (asked for with the embeddings off, it is
    refused: it runs in the embedding detector), reading only requests within ``reach`` of
    a forbidden example (``embeddings.GENERAL_CHAT_REACH`` for general chat; 0: all)."""
    if intent and embeddings is False:
        raise InputError("the monitor's intent classifier runs in its embedding detector",
                         hint="turn the embeddings on (THREADLINE_MONITOR_EMBEDDINGS=1, "
                              "--embeddings), or the intent classifier off")
    found = embedding_detector(enabled=True if intent else embeddings,
                               intent=intent is not False, reach=reach)
    return TrajectoryMonitor([RuleDetector(), *([found] if found is not None else []),
                              *([ModelClassifier(classifier)] if classifier is not None
                                else [])])


def constraint_detector(enabled: bool | None = None) -> Detector:
    """The standing-constraint detector ``Settings.constraint_classifier`` asks for: the
    embedding classifier with the rules when ``enabled``, or when None and the dense extra is
    installed; otherwise the rules alone (None without the extra says so in the log, once).
    Asked for without the extra, it is refused."""
    if enabled is False:
        return detect
    if not dense.available():
        if enabled:
            raise InputError("the constraint classifier needs the dense extra (PyTorch and "
                             "sentence-transformers)",
                             hint="pip install 'threadline[dense]', or turn it off with "
                                  "THREADLINE_CONSTRAINT_CLASSIFIER=0")
        _rules_only()
        return detect
    return ClassifiedDetector(dense.Embedder, model=dense.MODEL_NAME, dim=dense.DIMENSION)


@functools.cache
def _rules_only() -> None:
    log.info("standing constraints are found by the rules alone: the embedding classifier "
             "needs the dense extra (pip install 'threadline[dense]')")
