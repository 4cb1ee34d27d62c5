"""Task boundaries: where one piece of work ends and the next begins.

The natural moment to summarise is when a task is finished, not every N turns: what the
finished task needed verbatim, the next one mostly does not. A boundary is either explicit
(``Compaction.compact(engine, conversation, boundary=True)``, ``threadline conversations
compact --boundary``) or detected in the user's next message by the phrases people use to
change task ("new task:", "moving on", "different question", "that's solved, now…").
"""

from __future__ import annotations

import re

_NEW_TASK = re.compile(
    r"^\W*(?:ok(?:ay)?|thanks?|thank you|great|perfect|cool|alright|all right|good)?[\s,.!-]*"
    r"(?:(?:new|next|another|different|separate|unrelated) (?:task|topic|question|thing|"
    r"subject|problem|project)\b|moving on\b|let'?s move on\b|switching (?:gears|topics?)\b|"
    r"change of (?:topic|subject)\b|on (?:a|an) (?:different|unrelated|separate) (?:note|topic)|"
    r"(?:that'?s|that is) (?:solved|done|sorted|all for that)\b|let'?s (?:start|begin) "
    r"(?:over|fresh|something new|a new)\b|forget (?:that|the previous)\b)", re.I)


def starts_new_task(text: str) -> bool:
    """True when a user message opens with a change of task."""
    return bool(_NEW_TASK.search(text.strip()[:200]))
