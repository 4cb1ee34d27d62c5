"""The five conditions of Lost in Conversation, as the user turns each sends.

    FULL      the fully specified instruction, in one turn
    CONCAT    every shard in one turn (the goal, then the rest as a list): the same words as
              SHARDED, without the turns
    SHARDED   one shard per turn, the goal first, then the others in the task's order
    RECAP     SHARDED, then one more turn that restates every shard (as CONCAT does)
    SNOWBALL  SHARDED, but each turn first restates everything said before it

In every condition a run stops at the first correct answer, or when its turns run out; so a
RECAP run that is already correct before the recap never sends it. (The paper's recap
simulator appends the recap to every finished sharded conversation and grades that turn
only; here a correct answer ends the run first, as in SHARDED.)

A condition yields its turns lazily: the simulator phrasing turn n sees the replies to the
turns before it (``transcript``, which the runner fills as it goes).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from threadline.eval.multiturn.simulators import Transcript, UserSimulator
from threadline.eval.multiturn.tasks import Task


class Condition(StrEnum):
    FULL = "full"
    CONCAT = "concat"
    SHARDED = "sharded"
    RECAP = "recap"
    SNOWBALL = "snowball"


@dataclass(frozen=True)
class UserTurn:
    text: str
    kind: str                 # "full", "concat", "shard", "recap"
    shards: tuple[int, ...]   # the shards this turn reveals for the first time
    fallback: bool = False    # the simulator's words were unusable; the shard went verbatim


RECAP = "To recap, here is everything about the task:\n\n{task}\n\nPlease give your complete " \
        "answer, taking all of it into account."
SNOWBALL = "Just to restate what I said so far:\n{before}\n\nAnd also: {now}"


def user_turns(condition: Condition, task: Task, simulator: UserSimulator,
               transcript: Transcript) -> Iterator[UserTurn]:
    every = tuple(shard.id for shard in task.shards)
    if condition is Condition.FULL:
        yield UserTurn(task.full, "full", every)
        return
    if condition is Condition.CONCAT:
        yield UserTurn(task.concat(), "concat", every)
        return
    said: list[str] = []
    for shard in task.shards:
        words = simulator.say(task, shard, transcript)
        text = words.text
        if condition is Condition.SNOWBALL and said:
            text = SNOWBALL.format(before="\n".join(f"- {s}" for s in said), now=words.text)
        said.append(words.text)
        yield UserTurn(text, "shard", (shard.id,), words.fallback)
    if condition is Condition.RECAP:
        yield UserTurn(RECAP.format(task=task.concat()), "recap", ())


def turn_count(condition: Condition, task: Task) -> int:
    """How many user turns ``condition`` sends for ``task`` when no answer stops it early."""
    if condition in (Condition.FULL, Condition.CONCAT):
        return 1
    return len(task.shards) + (condition is Condition.RECAP)
