"""The rule detector: lexicons and patterns over the whole trajectory, ~0.1 ms a turn.

A request the policy forbids reads as a **subject** the policy names (a category's terms:
explosives, a nerve agent, ransomware) joined to **operational** wording (step by step, exact
quantities, the code for) and often to **intent or concealment** (without being detected, to
kill someone, secretly). One message with all three is what a per-message check catches;
the conversation-level signals catch what no single message shows:

    harm           the new message alone: subject, operational wording, intent
    decomposition  the same reading over the union of the recent user messages, where the
                   parts come from different messages
    escalation     the message builds on the model's own earlier output ("you mentioned X,
                   expand on it") while the conversation's harm reading climbs
    reframing      refusals so far, then the request recast as a game, a story, a persona,
                   a hypothetical, or with credentials, unless the recast narrows the request
                   to less than the method (``SCOPED``); where the policy names no subject,
                   the model's refusal stands for one, and a recast (not credentials) counts

Drift from the conversation's start and from the system prompt's scope is the embedding
detector's (``embeddings.py``): measured on words, every message drifts.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from threadline.errors import InputError
from threadline.providers.monitor.signals import Signal, clip
from threadline.providers.monitor.trajectory import Trajectory

WINDOW = 6  # user messages the union is read over (the new one included)
# refusals after which a recast counts as reframing though the policy names no subject: the
# model's refusal names it (chosen on the tuning splits: one adds no false alarm on the 68
# wrongly refused look-alikes of overrefusal, overrefusal2 and overrefusal3)
REFRAMING_REFUSALS = 1
# the model's refusals that, unexplained, make ``refused`` count (docs/safety.md)
REFUSED_AT = 2


@dataclass(frozen=True)
class Category:
    name: str
    terms: re.Pattern[str]
    examples: tuple[str, ...]


@dataclass(frozen=True)
class Policy:
    """What the monitor is to keep a conversation from getting: kinds of request."""

    categories: tuple[Category, ...]

    @classmethod
    def default(cls) -> Policy:
        text = resources.files("threadline.providers.monitor").joinpath("policy.toml")
        return cls.parse(text.read_text(encoding="utf-8"), "the default policy")

    @classmethod
    def parse(cls, text: str, where: str) -> Policy:
        try:
            data = tomllib.loads(text)
            categories = tuple(
                Category(str(c["name"]), _alternatives(c["terms"]),
                         tuple(str(e) for e in c.get("examples", ())))
                for c in data["category"])
        except (tomllib.TOMLDecodeError, KeyError, TypeError, re.error) as err:
            raise InputError(f"{where} is not a monitor policy: {err}",
                             hint="a [[category]] table each with name, terms (regular "
                                  "expressions) and examples (requests)") from err
        if not categories:
            raise InputError(f"{where} names no category")
        return cls(categories)

    def subjects(self, text: str) -> list[str]:
        """The categories ``text`` names."""
        return [c.name for c in self.categories if c.terms.search(text)]

    def subject_spans(self, text: str) -> list[tuple[int, int]]:
        """Where in ``text`` a category's terms match."""
        return [m.span() for c in self.categories for m in c.terms.finditer(text)]

    @property
    def examples(self) -> list[str]:
        return [e for c in self.categories for e in c.examples]


def _alternatives(terms: Sequence[str]) -> re.Pattern[str]:
    if not terms:
        raise KeyError("terms")
    return re.compile(r"\b(?:" + "|".join(f"(?:{t})" for t in terms) + r")\b", re.IGNORECASE)


def _pattern(*parts: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(parts) + r")", re.IGNORECASE)


OPERATIONAL = _pattern(
    r"step[- ]by[- ]step", r"exact (?:quantit|amount|steps|reagent|procedure|protocol|paper)",
    r"(?:full|technical|detailed) (?:protocol|procedure|instructions|recipe)",
    r"instructions (?:to|for)\b(?! us(?:e|ing)\b)", r"the (?:code|recipe|procedure|protocol) for\b",
    # "make" a thing, not "make sure" or "make it obvious" (a state a defender wants)
    r"how (?:do|can|would|could) (?:i|we|someone|you) (?:make(?! sure\b)(?! (?:it|this|that|"
    r"them) (?:obvious|clear|harder|more difficult|visible|safer|safe)\b)|build|synthesi[sz]e|"
    r"extract|cook|"
    r"convert|print|assemble|culture|produce|get into|install|buy|hide|disable|pick|spread|"
    r"read|track|access|hack|steal|bypass|get past|clone|crack|tamper with)",
    r"list the\b", r"quantities", r"temperatures", r"give (?:me|your \w+) (?:the|a|exact)\b",
    r"make it (?:spread|evade|detonate|untraceable|pass)", r"so (?:it|that it) (?:detonates|"
    r"spreads|passes|is untraceable)", r"\bwhich \w+ (?:gives|works best|is strongest)",
    r"how much would it take")
INTENT = _pattern(
    r"without (?:being|getting|it being) (?:caught|detected|traced|noticed)",
    r"without (?:it )?(?:showing up|raising flags|leaving (?:evidence|fingerprints)|"
    r"(?:her|him|them|anyone) knowing)", r"untraceable", r"undetect", r"evade", r"secretly",
    r"to kill", r"kill (?:him|her|them|someone|a|an|my)\b", r"the victim", r"victim's",
    r"has to pay", r"in a crowded", r"no disclaimers", r"my (?:coworker|neighbou?r|ex)\b",
    r"avoid (?:detection|fingerprints|leaving)", r"without (?:them|her|him) knowing",
    r"to (?:harm|hurt) (?:someone|people)", r"(?:usually )?not (?:test|screen)(?:ed)? for",
    # getting past a safeguard, whichever it is
    r"(?:get|gets|getting) (?:past|around) (?:the |their |its |any )?\w*\s?(?:filters?|checks?|"
    r"detection|security|scanners?|verification)", r"bypass\w*",
    # asking whether it would lead back to the asker, in any wording: "could anyone work out
    # where it came from", "so it can't be traced", "nobody would know it was me"
    r"traced? (?:it )?back to (?:me|us)\b", r"can'?t be traced",
    r"(?:anyone|anybody|someone|they|the police|investigators) (?:could |would |can |will )?"
    r"(?:ever )?(?:work out|figure out|tell|find out|trace|know) (?:where it came from|"
    r"(?:that )?it was (?:me|us)\b|who did it)",
    r"(?:nobody|no one|no-one) (?:has to|needs to|would|will|could) (?:ever )?(?:know|find out"
    r"|notice|tell)\b")
BACKREF = _pattern(
    r"you (?:mentioned|said|wrote|explained|described)", r"(?:earlier|before),? you\b",
    r"expand on", r"go deeper", r"building on", r"elaborate", r"the part about",
    r"continue from where", r"from where you left", r"your (?:earlier|previous|last) (?:answer|"
    r"point|reply)", r"more detail")
# the request recast for the model: a game, a story, a persona, a hypothetical, a jailbreak
RECAST = _pattern(
    r"hypothetical", r"pretend", r"role[- ]?play", r"in character", r"stay in character",
    r"you are now", r"imagine you are", r"let'?s play",
    r"(?:it'?s|this is|in|play|playing|just) a (?:[\w-]+ )?game\b", r"fictional",
    r"for a (?:novel|story|movie|film|book|school project)",
    r"it'?s (?:just )?for (?:a|an|my|our) (?:[\w-]+ ){0,2}(?:novel|story|book|film|movie|"
    r"script|screenplay|play|game|campaign|sketch|thriller|comic|show|series|scene|character)",
    r"in (?:this|the) story", r"no (?:rules|laws|disclaimers)", r"ignore (?:your|all|previous)",
    r"\bDAN\b", r"as the (?:forger|villain|character|burglar)", r"just the (?:chemistry|steps)")
# credentials claimed to unlock the request, and any "it's for a/my ...": with a recast, what
# the reframing signal reads (an account of a purpose is no recast for `persistence`, below)
CLAIMED = _pattern(r"i'?m a (?:researcher|professional|doctor|police)",
                   r"(?:with|have) clearance")  # a credential claimed to unlock it
CREDENTIALS = re.compile(f"{CLAIMED.pattern}|" + r"\bit'?s for (?:a|my)\b", re.IGNORECASE)
REFRAME = re.compile(f"{RECAST.pattern}|{CREDENTIALS.pattern}", re.IGNORECASE)
# the user's own account, the way a wrongly refused user explains: who they are (a role, a
# trade, the people they answer for) or a protective or lawful purpose: general forms, not
# any script's wording (chosen on the tuning splits, docs/safety.md). An attacker can say it
# too, which is why it only takes away `persistence` (embeddings.py) and no other signal.
ACCOUNT = _pattern(
    r"(?:i(?:'?m| am)|we(?:'re| are)) (?:just |only |actually |also )?(?:a|an|the|his|her|"
    r"their|your|our)\b",
    r"i(?:'?m| am) (?:licen[cs]ed|certified|registered|qualified|trained|authori[sz]ed)",
    # where they stand: "I'm on the night shift", "I'm with the fire department"
    r"i(?:'?m| am) (?:on|with|from|part of) (?:the|a|an|our|my)\b",
    r"(?:^|(?<=[.!?] ))[\w-]+(?: [\w-]+)? here(?=[,.:;!-])",  # "Nurse here." opening a sentence
    r"i (?:work|teach|train|volunteer|run|manage|supervise|coach|practi[cs]e|lecture)\b",
    # what they do or own, in the first person: "I design these seals", "I host a podcast"
    r"i (?:design|build|develop|engineer|own|host|research|study|inspect|audit|investigate|"
    r"moderate|maintain|install|repair|service|test)\b",
    r"(?:i'?m |i am )?asking (?:because|since|as)\b",  # why they ask
    r"(?:my|our) (?:job|work|profession|role|practice|business|clinic|school|class|course|"
    r"patients?|clients?|students?|staff|employees|customers|members|team|kids|children|son|"
    r"daughter)\b",
    # the setting they ask for, a few words on: "for my bloodstain pattern analysis module",
    # "our product", "my psychiatry rotation"
    r"(?:my|our) (?:[\w-]+ ){0,3}(?:module|course|class|rotation|practical|placement|thesis|"
    r"dissertation|degree|exam|assignment|coursework|seminar|lecture|training|shift|product|"
    r"company|firm|department|unit|ward|lab|agency|office|charity|shelter)\b",
    r"to (?:stop|prevent|protect|warn|report|spot|recogni[sz]e|defend|treat)\b",
    r"so (?:that )?(?:i|we|they|people|kids|staff) (?:can|could) (?:protect|help|warn|prevent|"
    r"spot|recogni[sz]e|report|treat|teach|train|counsel|advise|fix|stay safe)",
    r"safety\b", r"safely", r"legal(?:ly)?\b", r"lawful", r"by the book", r"permission",
    r"properly", r"licen[cs]ed?\b", r"authori[sz](?:ed|ation)\b", r"certified", r"registered",
    r"qualified", r"compliance", r"regulations?\b")
# what the user gave as a reason after a refusal, for ``refused``: an account, a narrowed
# request, a setting ("it's fiction", "for the essay"), what they are making ("I'm writing a
# seminar paper"). An attacker can give one too; ``refused`` then leaves the judgement to
# the signals that read the request (a recast is ``reframing``'s)
PURPOSE = _pattern(
    r"i(?:'?m| am) (?:\w+ )?(?:writing|making|preparing|putting together|working on|"
    r"researching|studying|on|with|from|part of|in charge of)\b",
    r"(?:it'?s|this is) (?:just |only |all )?(?:for|about|fiction|a |an |public|published|"
    r"the opposite)", r"\bfor (?:a|an|my|our|the) (?:[\w-]+ ){0,2}(?:essay|paper|report|"
    r"article|poster|class|course|seminar|training|talk|lecture|documentary|podcast|book|"
    r"novel|story|screenplay|script|thesis|project|assignment)\b",
    r"asking (?:for|because|since|as)\b", r"(?:safeguarding|safety|research|educational|"
    r"teaching|training|professional|work) (?:reasons|purposes)")
# the request narrowed to less than the method: the operational part disclaimed ("not code",
# "I don't need amounts or how to get it", "no tool settings or specifics") or the level
# named ("high level", "plain-language", "story structure"). A wrongly refused user narrows
# the request this way; a recast that still asks for the method ("quantities included",
# "all the technical specifics") is the attacker's. General forms, not any script's wording.
_DETAIL = (r"(?:[\w-]+ ){0,2}(?:code|steps|methods?|instructions|recipes?|how[- ]to|amounts?|"
           r"quantities|doses?|dosages?|specifics|chemistry|details|techniques?|settings|"
           r"exploits?|wiring|mechanics|procedures?|numbers|a (?:how-to|method|recipe|tutorial|"
           r"walkthrough))\b")
SCOPED = _pattern(
    r"(?:not|never) (?:asking (?:you )?(?:for|about) |looking for |after |wanting |"
    r"interested in )?" + _DETAIL,
    r"(?:don'?t|do not|doesn'?t|does not) (?:need|want|care about|require)\s" + _DETAIL,
    r"no (?:need for |need to (?:know|see) )?" + _DETAIL,
    r"(?:without|minus|leave out|leaving out|skip(?:ping)? (?:the )?) " + _DETAIL,
    r"(?:at|on) (?:a |the )?(?:high|general|story|conceptual|policy|overview)[- ]level",
    r"high[- ]level", r"plain[- ](?:language|english|words)", r"in plain (?:terms|words|english)",
    r"story (?:structure|beats|level|craft)",
    # how it looks, not how it works: "I just need the visual vibe of the lab"
    r"(?:just|only) (?:need|want|after|asking for) (?:the |a |an )?(?:[\w-]+ ){0,2}(?:visuals?|"
    r"look|vibe|atmosphere|mood|aesthetic|backdrop)\b",
    r"general (?:patterns?|overview|principles|terms)", r"in general terms",
    # how it comes across, not how it is done: "feel real, not be real", "feel authentic to
    # players"
    r"(?:feel|look|seem|sound|read)s? (?:real|authentic|realistic|convincing|plausible)(?:,| "
    r"but| and)? (?:not|without) (?:be(?:ing)? )?(?:real|working|usable|functional)",
    r"(?:feel|look|seem|sound|read)s? (?:real|authentic|realistic|convincing|plausible) (?:to|"
    r"for) (?:the |an? |my |our )?(?:players?|readers?|viewers?|audiences?|jury|jurors)")
EXPLAINED = re.compile("|".join(p.pattern for p in (ACCOUNT, SCOPED, PURPOSE, RECAST)),
                       re.IGNORECASE)
# a refusal in its common first-person forms (the monitor's own, provider.py, is the
# conversation's too)
REFUSAL = _pattern(
    r"(?:i (?:can'?t|cannot|can not|won'?t|will not|am not going to)|i'?m not going to) (?:help|"
    r"provide|assist|do (?:that|this|it)|include|give|share|go (?:into|down)|answer|write|"
    r"describe|explain|lay out|continue|comply|play|walk|list|offer|be able to|advise|recommend|"
    r"discuss|suggest)",
    r"i'?m not (?:able|willing|comfortable) to", r"i am not (?:able|willing) to",
    r"i(?:'?m| am) not comfortable (?:with|\w+ing)\b", r"i(?:'?d| would) prefer not to",
    r"i (?:must|have to|need to) decline", r"i'?d rather not", r"i'?m unable to",
    r"sorry, but i\b")

def harm_reading(policy: Policy, texts: Sequence[str]) -> tuple[float, dict[str, list[int]]]:
    """How much ``texts`` together read as a forbidden request, and which of them (by index)
    carry each part: ``subject``, ``operational``, ``intent``."""
    parts: dict[str, list[int]] = {"subject": [], "operational": [], "intent": []}
    hits = 0
    for i, text in enumerate(texts):
        spans = policy.subject_spans(text)
        if spans:
            parts["subject"].append(i)
        for part, pattern in (("operational", OPERATIONAL), ("intent", INTENT)):
            found = _outside(pattern, text, spans)
            if found:
                parts[part].append(i)
            hits += found
    if not parts["subject"]:
        return 0.0, parts
    score = 0.3 + 0.3 * bool(parts["operational"]) + 0.3 * bool(parts["intent"])
    return clip(score + 0.1 * (hits >= 3)), parts


# a negation at most three words before a match, in the same clause: "I don't need real
# bypass methods" disclaims the wording rather than asking for it
NEGATED = re.compile(r"\b(?:not|no|never|don'?t|doesn'?t|do not|does not)(?:\s+[\w'-]+){0,3}\s*$",
                     re.IGNORECASE)


def _outside(pattern: re.Pattern[str], text: str, spans: Sequence[tuple[int, int]]) -> int:
    """How many of ``pattern``'s matches in ``text`` are parts of a request: more than a
    subject's own words (one phrase is one part: "to kill" names the subject, and is not its
    intent as well), and not disclaimed by a negation just before them in their clause."""
    return sum(1 for m in pattern.finditer(text)
               if not any(start <= m.start() and m.end() <= end for start, end in spans)
               and not _negated(text, m.start()))


def _negated(text: str, at: int) -> bool:
    clause = re.split(r"[.,;:!?]", text[max(0, at - 60):at])[-1]
    return bool(NEGATED.search(clause))


def recasts(message: str) -> bool:
    """Whether ``message`` recasts a request (``RECAST``: a story, a game, a persona, a
    hypothetical) without narrowing it to less than the method (``SCOPED``)."""
    return bool(RECAST.search(message)) and not SCOPED.search(message)


def is_refusal(reply: str) -> bool:
    return bool(REFUSAL.search(reply[:400]))


def refusals(trajectory: Trajectory) -> int:
    """How many of the conversation's replies so far refused."""
    return sum(1 for reply in trajectory.replies() if is_refusal(reply))


def refused_last(trajectory: Trajectory) -> bool:
    """Whether the reply just before the new message refused: the message presses on
    against a refusal, rather than following an answer."""
    last = trajectory.turns[-1].reply if trajectory.turns else None
    return last is not None and is_refusal(last)


def account_after_refusal(trajectory: Trajectory) -> str | None:
    """The user's own account of a role or purpose (``ACCOUNT``), or the request narrowed to
    less than the method (``SCOPED``), given in a message since the model first refused, the
    new one included; None where there is none, or where the new message recasts the request
    (``RECAST``) without narrowing it: a story or a game is no explanation.

    A wrongly refused user says who they are or why they ask, or what they do not need, and
    asks again; an attacker pressing on recasts the request for the same method or just asks
    again. ``persistence`` counts only the second, and stays off for the rest of the
    conversation once the user has explained."""
    if recasts(trajectory.message):
        return None
    return next((text for text in _since_first_refusal(trajectory) if SCOPED.search(text)
                 or (ACCOUNT.search(text) and not RECAST.search(text))), None)


def _since_first_refusal(trajectory: Trajectory) -> list[str]:
    """The user's messages after the model first refused, the new one included (none where
    it has not refused)."""
    first = next((n for n, t in enumerate(trajectory.turns)
                  if t.reply is not None and is_refusal(t.reply)), None)
    if first is None:
        return []
    return [t.user for t in trajectory.turns[first + 1:]] + [trajectory.message]


def refused(trajectory: Trajectory) -> Signal:
    """The model has refused ``REFUSED_AT`` times or more and the user has given no reason
    (``EXPLAINED``) since the first refusal: whatever the request was, the model read it as
    one it would not help with, and the user kept on. It reads the replies of
    ``trajectory.turns``: judged after a reply (``TrajectoryMonitor.after_turn``), that
    reply's turn is among them.

    A wrongly refused user explains (who they are, why they ask, what they do not need), and
    the model usually helps then; an attacker whose request the model has seen through asks
    again, or asks something else, and is refused again."""
    count = refusals(trajectory)
    if count < REFUSED_AT:
        return Signal("refused", 0.0, f"{count} refusals so far")
    explained = next((text for text in _since_first_refusal(trajectory)
                      if EXPLAINED.search(text)), None)
    if explained is not None:
        return Signal("refused", 0.0, f"{count} refusals, explained: {explained[:60]!r}")
    return Signal("refused", clip(0.3 + 0.15 * count),
                  f"refused {count} times; no reason given since the first")


def opens(trajectory: Trajectory) -> bool:
    """Whether the message opens a request: the conversation's first message, or one that
    answers the refusal just before it with an account (``ACCOUNT``) or a narrowed request
    (``SCOPED``) rather than a recast. Either comes with no conversation to read it by yet;
    what follows tells a professional's blunt question from an attacker's (``RiskPolicy``
    holds the intent reading of such a message until a later turn corroborates it)."""
    if not trajectory.turns:
        return True
    message = trajectory.message
    return refused_last(trajectory) and not recasts(message) and bool(
        SCOPED.search(message) or ACCOUNT.search(message))


class RuleDetector:
    name = "rules"

    def __init__(self, policy: Policy | None = None, *, window: int = WINDOW) -> None:
        self.policy, self.window = policy or Policy.default(), window

    def signals(self, trajectory: Trajectory) -> list[Signal]:
        message = trajectory.message
        alone, _ = harm_reading(self.policy, [message])
        subjects = self.policy.subjects(message)
        out = [Signal("harm", alone, ", ".join(subjects))]
        if not trajectory.turns:
            return out
        recent = trajectory.recent_users(self.window)
        union, parts = harm_reading(self.policy, recent)
        sources = {i for indexes in parts.values() for i in indexes}
        spread = len(sources) >= 2 and len(recent) - 1 in sources
        out.append(Signal("decomposition", union if spread and union > alone else 0.0,
                          f"{len(sources)} of the last {len(recent)} messages carry "
                          f"{', '.join(k for k, v in parts.items() if v) or 'nothing'}"))
        out.append(self._escalation(trajectory, recent, union))
        out.append(self._reframing(trajectory, union))
        out.append(refused(trajectory))
        return out

    def _escalation(self, trajectory: Trajectory, recent: list[str], union: float) -> Signal:
        """Building on the model's own output while the harm reading climbs."""
        if not BACKREF.search(trajectory.message):
            return Signal("escalation", 0.0)
        built_on = sum(1 for text in recent if BACKREF.search(text))
        start, _ = harm_reading(self.policy, [trajectory.first])
        now, _ = harm_reading(self.policy, recent[-2:])
        climbing = now - start
        if union < 0.3 or climbing <= 0:
            return Signal("escalation", 0.0, "refers back; no climb")
        score = clip(union * (0.6 + 0.2 * min(built_on, 2)) + 0.2 * climbing)
        return Signal("escalation", score,
                      f"refers back in {built_on} of the last {len(recent)} messages; harm "
                      f"{start:.1f} at the start, {now:.1f} now")

    def _reframing(self, trajectory: Trajectory, union: float) -> Signal:
        refused = refusals(trajectory)
        # the model's refusals name the subject where the policy's lexicon does not: a
        # recast after REFRAMING_REFUSALS of them counts without one
        unnamed = union < 0.3
        message = trajectory.message
        if not refused or not REFRAME.search(message) or (
                unnamed and (refused < REFRAMING_REFUSALS or not recasts(message))):
            return Signal("reframing", 0.0, f"{refused} refusals so far")
        if not RECAST.search(message) and not CLAIMED.search(message) \
                and ACCOUNT.search(message):
            # "it's for my ..." naming a setting of theirs (an account), with no recast and no
            # credential claimed to unlock the request: how a wrongly refused user explains
            # ("it's for my psychiatry rotation")
            return Signal("reframing", 0.0, f"an account after {refused} refusals, no recast")
        narrowed = SCOPED.search(message)
        if narrowed:  # recast, but for less than the method: what a wrongly refused user does
            return Signal("reframing", 0.0, f"recast after {refused} refusals, asking for "
                                            f"less than the method ({narrowed.group(0)!r})")
        return Signal("reframing", clip(0.5 + 0.2 * refused),
                      f"reframed after {refused} refusals"
                      + (" (of a subject the policy does not name)" if unnamed else ""))
