"""Extraction: the candidate memories in one of the user's messages, and what was turned away.

Two extractors feed the writer's gate. The rules need no model: first-person statements ("I
live in Oslo", "my daughter is called Mia", "I went to a support group yesterday"),
retractions ("I no longer live in Oslo"), and instructions, which are never memory. The model
extractor asks a model for the facts as JSON and checks the answer twice: against a schema
(malformed output is rejected and counted, and the rules' candidates still stand) and against
the message: a fact that quotes the user is theirs; anything else is the model's inference,
which the writer's default policy does not store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from jsonschema import Draft202012Validator

from threadline.items import Item, ItemKind
from threadline.memory.store import Source
from threadline.models.base import ModelBackend
from threadline.models.calling import call_model, call_record
from threadline.request import Message, Request, Segment, SegmentKind, Stability
from threadline.rewrite.anchors import content_words
from threadline.stores.base import Commit, Store

Decision = dict[str, Any]

# first-person statements of something that has one value at a time, and what it is (their
# "key"): a later statement with the same key is a new value of the same thing. Liking,
# having or doing something is not keyed: "I love hiking" does not replace "I love jazz".
_KEYED = [re.compile(pattern, re.IGNORECASE) for pattern in (
    r"\bI(?: a|')m (vegetarian|vegan|\w+ years old)\b",
    r"\bI (live|work|grew up|was born) (?:in|at|for) ",
    r"\bI(?: a|')m (?:moving|relocating) to ",
    r"\bmy (\w+(?: \w+)?) (?:is|are) (?:called|named) ",
    r"\bmy (favou?rite \w+) (?:is|are) ",
    r"\b(?:call me|my name is) ",
)]
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Mm]y|[Ww]e|[Ww]e're|[Ww]e've|[Oo]ur)\b")
_RETRACTION = re.compile(r"\b(?:no longer|any ?more)\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:no longer|don'?t|do not|not|any ?more)\b\s*", re.IGNORECASE)
# a request to the assistant ("Check my page", "Always send …"), not a statement about anyone
_INSTRUCTION = re.compile(r"^\s*(?:please\s+)?(?:always|never|ignore|forget|remember to|send|"
                          r"delete|do not|don'?t|check|tell|show|find|give|make|write|help|"
                          r"book|look up|search|list|summari[sz]e|explain|translate|remind|"
                          r"email|open|read|obey)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
MIN_CONTENT_WORDS = 2  # "I know, right!" is chatter, not memory


@dataclass(frozen=True)
class Candidate:
    text: str
    key: str | None          # what it is about, when a rule can tell
    retract: bool = False    # the user withdrew what ``key`` said
    source: Source = Source.USER_STATED  # the gate decides what may be stored, by policy


def reject(text: str, reason: str) -> Decision:
    return {"text": text[:200], "decision": "REJECT", "reason": reason}


_SOURCES = {ItemKind.USER: Source.USER_STATED, ItemKind.TOOL_RESULT: Source.TOOL_RETURNED}


def rule_candidates(item: Item, *, max_bytes: int) -> tuple[list[Candidate], list[Decision]]:
    """Candidates from a user message (or a tool result, whose statements are the tool's) by
    the rules, and what was turned away (with why). Instructions are never candidates,
    whoever wrote them."""
    source = _SOURCES.get(item.kind)
    if source is None:
        return [], [reject(item.text, f"a {item.kind} holds no statements to learn")]
    found: list[Candidate] = []
    refused: list[Decision] = []
    for sentence in (" ".join(s.split()) for s in _SENTENCE.findall(item.text)):
        if not sentence or sentence.endswith("?"):
            continue
        if _INSTRUCTION.match(sentence):
            refused.append(reject(sentence, "an instruction, not a fact: never stored as "
                                            "memory"))
            continue
        text = sentence.rstrip(" .!")
        if len(text.encode("utf-8")) > max_bytes:
            refused.append(reject(text, f"over {max_bytes:,} bytes: one fact per entry"))
            continue
        if _RETRACTION.search(text):
            key = key_of(_NEGATION.sub("", text))
            if key is not None:
                found.append(Candidate(text, key, retract=True, source=source))
                continue
        key = key_of(text)
        if key is not None or (_FIRST_PERSON.search(text)
                               and len(content_words(text)) >= MIN_CONTENT_WORDS):
            found.append(Candidate(text, key, source=source))
    return found, refused


def turn_text(item: Item, *, max_bytes: int) -> str | None:
    """The user's message as a turn to recall by: its sentences as said, questions included,
    less any instruction (never stored, whoever wrote it), cut at a sentence to
    ``max_bytes``; None for what is not the user's or is too slight to find anything by."""
    if item.kind is not ItemKind.USER:
        return None
    kept: list[str] = []
    size = 0
    for sentence in (" ".join(s.split()) for s in _SENTENCE.findall(item.text)):
        if not sentence or _INSTRUCTION.match(sentence):
            continue
        size += len(sentence.encode("utf-8")) + 1
        if size > max_bytes:
            break
        kept.append(sentence)
    text = " ".join(kept)
    return text if len(content_words(text)) >= MIN_CONTENT_WORDS else None


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_PLAN = re.compile(r"\b(?:going to|gonna|will|'ll|plan(?:ning)? to|next)\b", re.IGNORECASE)
_IN_MONTH = re.compile(r"\b(?:in|this|next|during) (" + "|".join(_MONTHS) + r")\b",
                       re.IGNORECASE)


def planned_span(text: str, said_at: datetime) -> tuple[datetime, datetime] | None:
    """When a plan for a named month holds: "I'm going to Singapore in July", said in May
    2026, holds from 1 July to 1 August 2026 (a month already past this year means next
    year's), and reads as past once it is over. None for anything else."""
    month = _IN_MONTH.search(text)
    if month is None or not _PLAN.search(text):
        return None
    number = _MONTHS.index(month.group(1).casefold()) + 1
    year = said_at.year + (number < said_at.month)
    start = said_at.replace(year=year, month=number, day=1, hour=0, minute=0, second=0,
                            microsecond=0)
    end = start.replace(year=year + (number == 12), month=number % 12 + 1)
    return start, end


def key_of(text: str) -> str | None:
    """What a first-person statement is about ("live", "daughter", "prefer"), or None if no
    rule can tell."""
    for pattern in _KEYED:
        match = pattern.search(text)
        if match:
            return " ".join((match.group(1) if match.groups() else match.group(0)
                             ).casefold().split())
    return None


# -- the model extractor --------------------------------------------------------------------

PROMPT = ("Extract the facts the user states about themselves in the message below: what "
          "they are, have, like, did or plan. Answer with JSON only, in this shape: "
          '{"facts": [{"text": "<the user\'s own words, copied exactly>", '
          '"about": "<one or two words: what the fact is about>"}]}. '
          'If there are none, answer {"facts": []}.')
SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["facts"], "additionalProperties": False,
    "properties": {"facts": {"type": "array", "maxItems": 20, "items": {
        "type": "object", "required": ["text"], "additionalProperties": False,
        "properties": {"text": {"type": "string", "minLength": 1},
                       "about": {"type": "string", "maxLength": 60}}}}}}
_VALIDATOR = Draft202012Validator(SCHEMA)
_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ModelExtraction:
    candidates: list[Candidate]
    decisions: list[Decision]  # an EXTRACT record (schema-valid or not), then rejections
    valid: bool


def facts_request(text: str) -> Request:
    """The request that asks the model for the facts in a user message's ``text``."""
    return Request(tools=(), segments=(
        Segment(SegmentKind.SYSTEM, Stability.DEPLOY, (Message("system", PROMPT),),
                cache_point=True),
        Segment(SegmentKind.CURRENT, Stability.TURN, (Message("user", text),))))


def model_candidates(store: Store, model: ModelBackend, item: Item, *, max_bytes: int,
                     clock: Callable[[], datetime]) -> ModelExtraction:
    """Ask ``model`` for the facts in the user message ``item``; the call is recorded in the
    item's conversation as a side call (``purpose="memory"``)."""
    request = facts_request(item.text)
    outcome = call_model(model, request, clock=clock)
    text = outcome.completion.text if outcome.completion is not None else ""
    facts, problem = parse(text) if outcome.error is None else \
        ([], f"model call failed: {type(outcome.error).__name__}: {outcome.error}")
    record = call_record(head=item, branch=item.branch, request=request, outcome=outcome,
                         model_id=model.model_id, error=problem)
    store.commit(Commit(conversation_id=item.conversation_id, created_at=clock(),
                        branch=item.branch, check_head=False,
                        call=replace(record, purpose="memory")))
    decisions: list[Decision] = [{"decision": "EXTRACT", "extractor": model.model_id,
                                  "valid": problem is None, "reason": problem or "schema-valid"}]
    candidates = []
    said = " ".join(item.text.split()).casefold()
    for fact in facts:
        quote = " ".join(fact["text"].split()).strip(" \"'“”.")
        if len(quote.encode("utf-8")) > max_bytes:
            decisions.append(reject(quote, f"over {max_bytes:,} bytes: one fact per entry"))
        elif not quote or _INSTRUCTION.match(quote):
            decisions.append(reject(quote, "an instruction, not a fact: never stored as "
                                           "memory"))
        else:
            about = " ".join(str(fact.get("about", "")).casefold().split())
            # a quote is the user's own words; anything else is the model's inference
            source = Source.USER_STATED if quote.casefold() in said else Source.MODEL_INFERRED
            candidates.append(Candidate(quote, key_of(quote) or about or None, source=source))
    return ModelExtraction(candidates, decisions, problem is None)


def parse(text: str) -> tuple[list[dict[str, Any]], str | None]:
    """The facts in a model's answer, or why there are none: not JSON, or not the schema."""
    # the framing is forgiven (a preamble, a fenced block), the content is not
    fenced = _FENCED.search(text)
    body = fenced.group(1) if fenced else text[text.find("{"):] if "{" in text else text
    try:
        value, _ = json.JSONDecoder().raw_decode(body.strip())
    except ValueError as err:
        return [], f"malformed output: not JSON ({err.__class__.__name__})"
    error = next(iter(_VALIDATOR.iter_errors(value)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the answer"
        return [], f"malformed output: {where}: {error.message[:160]}"
    return list(value["facts"]), None
