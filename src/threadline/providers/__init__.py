"""Context providers: what a turn is shown besides its conversation.

Each module is one provider (the protocol is ``turn/providers.py``):

    clock.py          TimeProvider          the time the turn started, shown in its tail
    working_state.py  WorkingStateProvider  the task's goal, plan, decisions, facts, questions
    retrieval.py      RetrievalProvider     passages a corpus has for the message's standalone
                                            query, and answers given before to the same question
    memory.py         MemoryProvider        what is remembered about the user that bears on it
    reminder.py       ReminderProvider      a fixed note kept in view every turn (a persona)
    goal.py           GoalReminder          the goal and/or the system prompt's policy,
                                            restated every N turns or when a monitor asks
    query.py          the message as a standalone query, rewritten once per turn and shared
    monitor/          TrajectoryMonitor     judges each turn in its conversation: reminds,
                                            restricts tools, refuses, flags (docs/safety.md)

A new context source goes here: subclass ``turn.providers.Provider`` and register it with
``Engine(providers=[...])``; the engine needs no change.
"""

from threadline.providers.clock import TimeProvider
from threadline.providers.goal import GoalReminder, Remind
from threadline.providers.memory import MemoryProvider
from threadline.providers.reminder import ReminderProvider
from threadline.providers.retrieval import CorpusSearch, RetrievalProvider
from threadline.providers.working_state import WorkingStateProvider

__all__ = ["CorpusSearch", "GoalReminder", "MemoryProvider", "Remind", "ReminderProvider",
           "RetrievalProvider", "TimeProvider", "WorkingStateProvider"]
