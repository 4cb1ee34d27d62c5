"""The rules that decide which sentences of a user message set a standing constraint.

Two passes over a message. First, each sentence on its own: an explicit scope ("from now on",
"until further notice", "in every answer", "henceforth"), ``always``/``never`` addressed to
the assistant, a stated preference ("I'd prefer…", "I'd rather not…"), a naming rule, a style
rule about replies ("respond in French", "only reply with code", "your responses should…"),
a prohibition ("do not write explanations", "don't break character"), a persona to keep
("act as…", "you are a…", "pretend you're…", "stay in character", "let's play…"), or a
protocol for the replies to come ("I will type commands and you will reply…", "when I …,
respond…", "after each move…", "one question at a time").

Second, a message that sets a persona, a scope or a protocol (a *set-up* message: people write
their rules for the whole conversation in one) also contributes its directives addressed to
the assistant ("Use descriptive variable names.", "You should only provide…", "Your job is…"),
which read as one-off requests anywhere else.

Questions are never constraints; neither are sentences over 400 characters (pasted text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from threadline.compaction.summarize import sentences

_MAX = 400

# leading discourse words and list markers ("- [Only SQL] Do not…", "2) Do not…")
_LEAD = re.compile(r"^(?:(?:[-*•>]+|\d{1,2}[.)]|\([a-z0-9]\)|\[[^\]]{1,30}\]|(?:also|and|but|"
                   r"so|ok|okay|oh|btw|one more thing|plus|however|finally|lastly|"
                   r"additionally|please|kindly|remember|note|just)\b)"
                   r"[\s,:;-]*)+", re.I)
_SCOPE = re.compile(
    r"\b(from now(?: on)?|going forward|from here on|hence ?forth|hereafter|"
    r"for the rest of (?:this|the|our) (?:conversation|chat|session|discussion|project)|"
    r"rest of (?:this|the) (?:conversation|chat|session)|"
    r"for all (?:future|subsequent|following) |until (?:further notice|I say|I tell you|"
    r"I ask)|in (?:all|every|each) (?:of your )?(?:future |subsequent |following )?"
    r"(?:answers?|responses?|replies|messages|outputs?)|"
    r"unless I say otherwise|at all times|(?:in|for) (?:anything|everything) (?:that )?you "
    r"(?:write|say|produce|send)|in this (?:conversation|chat|"
    r"session|thread)|(?:future|subsequent|later) (?:code|answers?|responses?|replies|"
    r"generations?|evaluations?|messages|prompts|outputs?)|"
    r"(?:answer|respond|reply)\b.{0,60}\bin the future)\b", re.I)
# habits that set no rule by themselves in narration ("every time you pay…")
_HABIT = re.compile(r"\b(?:every time you|each time you|whenever you)\b", re.I)
# what makes a style rule or prohibition about this one reply, not the rest
_ONE_OFF = re.compile(r"\b(?:this|these|those|above|below|following|for now|right now|"
                      r"this time|yet|again|acknowledged?|understood|confirm|"
                      r"if you understand)\b", re.I)
_ALWAYS = re.compile(r"^(?:you\s+(?:should|must|will|shall|need to|have to)\s+|you'll\s+|"
                     r"you\s+)?(?:must\s+)?(?:always|never)\b", re.I)
# "…, so never include nuts": a rule stated after a reason
_CLAUSE = re.compile(r"[,;:]\s*(?:so|and|but|therefore|then|which means)?\s*(?:please\s+)?"
                     r"(?:always|never)\s+(?!mind\b|again\b|ever\b|before\b|been\b|was\b|"
                     r"were\b|had\b|have\b|did\b|do\b|got\b|seen\b|heard\b)[a-z]+", re.I)
_MUST = re.compile(r"^(?:you\s+)?(?:must not|must never|should never|shall not|may not|"
                   r"are not allowed to|aren't allowed to|are never to|must)\b"
                   r"(?!\s+(?:generate|write|create|produce|make|build|find|solve|calculate)"
                   r"\s+(?:a|an|the)\b)", re.I)
_APOS = "['’]"
_PREFER = re.compile(
    rf"^(?:I|we)(?:\s+would|{_APOS}d)?\s+(?:really\s+|much\s+)?(?:prefer|rather)\b|"
    r"^(?:I|we)\s+(?:like my|want my|want all|want every|want you to always|"
    r"want you to never)\b|"
    rf"[,;]\s*(?:but|and|so)?\s*I(?:\s+would|{_APOS}d)?\s+(?:really\s+)?(?:prefer|rather)\b|"
    rf"\bI\s+(?:really\s+)?(?:do not|don{_APOS}?t)\s+want\s+(?:to be|you to)\b", re.I)
_NAMING = re.compile(r"^(?:call me|address me as|refer to me as|my name is|my pronouns are)\b",
                     re.I)
_LANGUAGES = (r"english|french|spanish|german|chinese|japanese|korean|arabic|portuguese|"
              r"italian|russian|hindi|vietnamese|indonesian|turkish|dutch|polish|persian|"
              r"hebrew|thai|ukrainian|français|中文|español|deutsch")
_STYLE = re.compile(
    r"^(?:only\s+)?(?:respond|reply|answer|speak|talk)\b|"
    r"^only (?:reply|respond|answer|output|return|give|write|provide|use|print)\b|"
    r"^write (?:only |everything |all |your \w+ )?(?:in|using) \b|"
    rf"^(?:write|answer|reply|respond|speak)\b.{{0,30}}\bin (?:{_LANGUAGES})\b|"
    r"^format (?:your|all|every|each|the) (?:answers?|responses?|replies|outputs?)\b|"
    r"^use (?:only )?(?:British|American|UK|US|metric|imperial|SI|\w+ spelling|\w+ units|"
    r"the metric|the imperial|bullet points|markdown|plain text|tabs|spaces|type hints|"
    r"formal|informal|a formal|an informal|\w+ case)\b|"
    r"^keep (?:your |all |the |every )?(?:answers?|responses?|replies|explanations?|"
    r"messages|it|things|them) (?:short|brief|concise|under|below|simple|to)\b|"
    r"^(?:be|stay) (?:concise|brief|formal|polite|terse|direct)\b|"
    r"^(?:avoid|no more|stop using|stop adding|don't use|do not use) \w+|"
    r"^(?:use|only use) \w+(?: \w+)? only\b|^only use\b|"
    r"\b(?:your|all|every|each)\s+(?:(?:future|subsequent|following)\s+)?(?:answers|"
    r"responses|replies|outputs)\s+(?:should|must|will|need to|have to|shall|are to)\b|"
    r"^(?:ask|give|show|send|answer|explain|write|provide|do|generate|present)\b.{0,40}"
    r"\bone (?:question|step|move|part|item|section|thing) at a time\b", re.I)
# "It's essential that you never…": a rule behind an impersonal opening
_INSIST = re.compile(r"\b(?:essential|important|crucial|sure) that you (?:do not|don['’]?t|"
                     r"never|always|must)\b", re.I)
_FORBID = re.compile(
    r"^(?:do not|don['’]?t|dont|never|you (?:do not|don['’]?t|dont|never|must not|should not|"
    r"shouldn['’]t|will not|won['’]t))\s+(?:ever\s+)?(?:touch|modify|delete|remove|push|"
    r"deploy|call|run|use|write|commit|change|edit|share|mention|include|reveal|suggest|"
    r"recommend|contact|email|book|spend|exceed|go over|assume|give|provide|offer|add|send|"
    r"say|quote|cite|translate|summarise|summarize|guess|type|explain|break|deviate|ask|"
    r"repeat|generate|reply|respond|answer|print|output|refer|apologi[sz]e|let|stop|"
    r"copy|rephrase|restate)\b", re.I)
_PERSONA = re.compile(
    r"^(?:i (?:want|need|would like) you to |i['’]d like you to |need you (?:to )?|"
    r"can you |could you |you will |you['’]ll |you are going to |you['’]re going to )?"
    r"(?:act|acting|behave|pose|role-?play|respond|reply|answer|talk|speak|write)\s+"
    r"(?:and \w+ )?(?:as|like)\b|"
    r"\b(?:going to|will|to) act as\b|"
    r"^(?:pretend|imagine|assume|suppose|believe)\s+(?:that\s+)?(?:you\s*(?:are|['’]re)|"
    r"we\s*(?:are|['’]re)|to be|being|you)\b|^assuming you are\b|"
    r"^play\b.{0,40}\b(?:against|with) me\b|"
    r"^you(?:['’]re| are)\s+(?:now\s+)?(?:a|an|the|my|one of)\s+(?!bit\b|little\b|lot\b|"
    r"genius\b|good\b|great\b|right\b|wrong\b|most\b|best\b|worst\b|only one\b)|"
    r"^you(?:['’]re| are) [A-Z][\w-]*(?:GPT|AI|bot)\b|"
    r"^(?:as|acting as) [^,]{1,60},\s*(?:you|please|i want you)\b|"
    r"^(?:stay|remain|keep) in (?:character|role)\b|"
    r"^(?:(?:do not|don['’]?t|never)\s+)?break (?:from |out of )?character\b|"
    r"^(?:let['’]?s|lets|let us|wanna|shall we|please) play\b|"
    r"^(?:your|you) (?:role|job|task|goal|only goal) (?:is|will be)\b|"
    r"\bkeep (?:talking|speaking|writing|replying|answering) (?:in|as|like)\b", re.I)
_PROTOCOL = re.compile(
    r"^(?:i will|i['’]ll|i am going to|i['’]m going to)\b.{0,160}\b(?:and )?you (?:will|"
    r"should|must|['’]ll|are to)\b|"
    r"^when(?:ever)?\b.{0,160}\b(?:you (?:should|must|will)|please (?:respond|reply|answer|"
    r"only)|respond|reply|answer)\b|"
    r"^(?:after|before|at the end of|at the start of|for) (?:each|every) (?:new )?(?:move|"
    r"step|question|answer|response|reply|message|prompt|turn|round|script|query|request|"
    r"input|command|text|article|set|abstract|lyric|concept|item I)s?\b|"
    r"^(?:each|every) time\b", re.I)
# rules written as a list under a heading ("Rules:", "Style guide: …", "the following guidelines")
_RULEBOOK = re.compile(
    r"\b(?:following|the below|below|general) (?:rules|guidelines|instructions|"
    r"requirements|constraints)\b|^(?:rules|guidelines|task|format|writing style|"
    r"writing tone|special instructions?|(?:voice and )?style guide)\s*:", re.I)
# what a set-up message's other sentences count for: a directive to the assistant
_DIRECTIVE = re.compile(
    r"^(?:you\s+(?:should|must|will|shall|are to|need to|have to|may not|can['’]?t|cannot)|"
    r"your (?:answers?|responses?|replies|outputs?|job|task|role|goal|language|tone)|"
    r"do not|don['’]?t|dont|never|always|only|use|avoid|keep|write|make sure|ensure|include|"
    r"stay|reply|respond|answer|print|give|provide|refrain|wait|generate|format|"
    r"translate|consider|describe|replace|announce|ask|bias)\b|"
    r"^[\w\[\]\"' -]{1,40}\b(?:should|must)\s+(?:not\s+|always\s+|never\s+|only\s+)?"
    r"(?:be|include|contain|start|end|have|use|follow|consider|focus)\b", re.I)
_PERSONAL = re.compile(r"^(?:I|we|he|she|they|it|this|that|there)\b", re.I)


@dataclass(frozen=True)
class Verdict:
    """What the rules make of one sentence a detector looks at."""

    sentence: str
    rule: bool        # the rules' verdict: it sets a standing constraint
    sets_up: bool     # it sets up a persona, a scope, a protocol or a rule list
    directive: bool   # it is a directive to the assistant (counted in a set-up message)


def eligible(sentence: str) -> bool:
    """Whether a sentence can be a constraint at all: not a question, not pasted text."""
    return not sentence.endswith("?") and len(sentence) <= _MAX


def verdicts(text: str) -> list[Verdict]:
    """The rules' verdict on every eligible sentence of ``text``, in order."""
    candidates = [s for s in sentences(text) if eligible(s)]
    bodies = [_LEAD.sub("", s).strip(" ,;:-") for s in candidates]
    setting_up = [_sets_up(s, b) for s, b in zip(candidates, bodies, strict=True)]
    directive = [bool(_DIRECTIVE.match(b)) for b in bodies]
    ruled = [_sets_rule(s, b) for s, b in zip(candidates, bodies, strict=True)]
    if any(setting_up):
        ruled = [r or d for r, d in zip(ruled, directive, strict=True)]
    return [Verdict(*row) for row in zip(candidates, ruled, setting_up, directive, strict=True)]


def standing(text: str) -> list[str]:
    """The sentences of ``text`` that set a standing constraint, verbatim, in order."""
    return [v.sentence for v in verdicts(text) if v.rule]


def _sets_up(sentence: str, body: str) -> bool:
    return bool(_SCOPE.search(sentence) or _PERSONA.search(body) or _PROTOCOL.match(body)
                or _RULEBOOK.search(body))


def _sets_rule(sentence: str, body: str) -> bool:
    if _sets_up(sentence, body) or _HABIT.search(sentence):
        return True
    if (_PREFER.search(body) or _NAMING.match(body) or _CLAUSE.search(body)
            or _INSIST.search(body)):
        return True
    if _PERSONAL.match(body):
        return False  # "I always forget my keys" describes; it does not instruct
    if _ALWAYS.match(body):
        return True
    return bool((_MUST.match(body) or _STYLE.search(body) or _FORBID.match(body))
                and not _ONE_OFF.search(body))
