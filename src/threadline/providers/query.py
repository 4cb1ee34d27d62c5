"""The turn's message as a standalone query: rewritten once, shared by every provider.

"And the year before?" searches and recalls nothing on its own. The first provider that needs
the standalone query rewrites it (``rewrite/``: rewriters raced under a deadline, the raw
message as fallback) and the turn's other providers reuse that result, so a turn that searches
a corpus and recalls memory rewrites its message once.
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.items import validate_text
from threadline.plugin import Host
from threadline.rewrite import DEFAULT_DEADLINE_S, DETERMINISTIC, Rewriter, RewriteResult, race
from threadline.rewrite.deterministic import turns_of
from threadline.rewrite.model import model_rewriter
from threadline.stores.base import MAIN
from threadline.turn.providers import Gathering

_KEY = "standalone query"


def standalone(found: Gathering, rewriters: Sequence[Rewriter],
               deadline_s: float = DEFAULT_DEADLINE_S) -> RewriteResult:
    """The message of ``found`` as a standalone query: by ``rewriters`` if this provider is
    the turn's first to ask, else what the first one got."""
    return found.once(_KEY, lambda: race(rewriters, turns_of(found.history), found.text,
                                         deadline_s=deadline_s))


def rewriters(host: Host, *, use_model: bool = True) -> list[Rewriter]:
    """The deterministic rewriter, raced with the engine's own model unless ``use_model`` is
    False (the model waits for the engine's lock, so it never overlaps a turn's call)."""
    if not use_model:
        return [DETERMINISTIC]
    return [DETERMINISTIC, model_rewriter(host.model, host.model_lock)]


def rewrite(host: Host, conversation_id: str, text: str, branch: str = MAIN, *,
            deadline_s: float = DEFAULT_DEADLINE_S, use_model: bool = True) -> RewriteResult:
    """``text`` as a standalone query given a branch's conversation (``threadline rewrite``)."""
    validate_text(text, max_bytes=host.max_message_bytes)
    return race(rewriters(host, use_model=use_model),
                turns_of(host.store.history(conversation_id, branch)), text,
                deadline_s=deadline_s)
