"""A recall-first summary of the turns leaving the view.

Recall first, precision second: what the user said is kept whole when it is short (it is the
requirements), and otherwise, like the assistant's and the tools' messages, every sentence that
carries a decision and its reason, a failure ("tried X, failed because Y"), an open question,
or an identifier, path or number is kept verbatim. Every line says where it came from: the user
said, a tool returned, the model inferred. The previous summary, if any, is carried forward
whole, so nothing a compaction kept is lost by the next one. No model is involved, so the
summary is deterministic and cannot invent anything; identifiers survive because they are
copied, never paraphrased. What an untrusted tool output contributes stays fenced as
untrusted (``threadline.trust``), so a summary never turns a tool's words into the
conversation's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from threadline.items import Item, ItemKind
from threadline.trust import fence

USER_WHOLE = 300       # a user message up to this many characters is kept whole
SENTENCES_LIMIT = 4    # sentences kept from one assistant message or tool result
LINE_LIMIT = 300       # characters of one kept sentence or tool-output line

_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")  # "41.01" and "v2.3" are not boundaries
_SALIENT = re.compile(
    r"\d|[A-Z]{2,}|\b[A-Z][a-z]+[A-Z]\w*|\b\w+_\w+|[\w.-]+/[\w./-]+|`[^`]+`|\"[^\"]+\"|"
    r"(?i:\b(?:decid|chose|choose|because|since|so that|instead|agreed|confirm|will|won't|"
    r"fail|error|didn't work|did not work|doesn't work|not possible|unable|cannot|can't|"
    r"tried|todo|open question|unresolved|pending|blocked|next step))")


def summarize(items: Sequence[Item], previous: str | None = None, *,
              limit: int | None = None, count: Callable[[str], int] | None = None) -> str:
    """The summary of ``items`` (in log order), following ``previous`` if there was one.

    With ``limit`` (tokens, by ``count``), detail goes first where the summary would not fit:
    the assistant's and tools' sentences are cut down to one each, then left out; what the
    user said and the earlier summary are always kept."""
    for detail in (SENTENCES_LIMIT, 1, 0):
        text = _summary(items, previous, detail)
        if limit is None or count is None or count(text) <= limit:
            break
    return text


def _summary(items: Sequence[Item], previous: str | None, detail: int) -> str:
    names = {i.content["call_id"]: (i.content["name"], i.content["arguments"]) for i in items
             if i.kind is ItemKind.TOOL_CALL}
    lines: list[str] = []
    if previous:
        lines += ["Earlier:", previous.strip(), ""]
    if items:
        lines.append(f"Turns {items[0].turn}-{items[-1].turn} (log items "
                     f"#{items[0].seq}-#{items[-1].seq}; fetch_item(seq) returns any verbatim):")
    for item in items:
        if item.kind is ItemKind.USER:
            text = item.content["text"].strip()
            if not text:  # an imported empty message: nothing was said, nor sent
                continue
            said = text if len(text) <= USER_WHOLE else \
                _salient(text, limit=None, line_limit=LINE_LIMIT) or _clip(text, USER_WHOLE)
            lines.append(f"- [turn {item.turn}] the user said: {said}")
        elif item.kind is ItemKind.ASSISTANT and detail:
            kept = _salient(item.content["text"], limit=detail, line_limit=LINE_LIMIT)
            if kept:
                lines.append(f"  - the model inferred: {kept}")
        elif item.kind is ItemKind.TOOL_RESULT and detail:
            name, args = names.get(item.content["call_id"], ("a tool", {}))
            call = f"{name}({', '.join(f'{k}={v}' for k, v in sorted(args.items()))})"
            kept = _salient(item.content["output"], limit=detail, line_limit=LINE_LIMIT)
            status = "failed" if item.content.get("is_error") else "returned"
            kept = kept or "(no salient lines)"
            if item.content.get("untrusted"):  # the tool's words stay fenced as its data
                kept = fence("tool-output", kept, tool=item.content.get("tool", name))
            lines.append(f"  - tool {call} {status} (item #{item.seq}): {kept}")
    return "\n".join(lines).strip()


def _salient(text: str, *, limit: int | None = SENTENCES_LIMIT, line_limit: int) -> str:
    """The sentences of ``text`` (up to ``limit``) that carry something worth recalling,
    verbatim but for whitespace."""
    kept = []
    for sentence in sentences(text):
        if _SALIENT.search(sentence):
            kept.append(_clip(sentence, line_limit))
        if len(kept) == limit:
            break
    return " ".join(kept)


def sentences(text: str) -> list[str]:
    """``text`` split into sentences and lines, each stripped, none empty."""
    return [part.strip() for part in _BOUNDARY.split(text) if part.strip()]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
