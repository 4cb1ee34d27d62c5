"""The embedding detector: the shipped MiniLM model (the ``dense`` extra) on the trajectory.

    semantic   how close the union of the recent user messages (or, where closer, the new
               message alone) is, in meaning, to a request the policy forbids (its
               examples); catches shards and paraphrases the rule lexicons miss
    intent     (with ``intent=True``) how likely the new message, or the union of the recent
               ones where the new message adds to it, is a request the policy forbids, by a
               classifier fitted on a broad set of forbidden requests and look-alikes
               (``intent.py``): it reaches harms no example names (docs/safety.md)
    persistence  (with ``intent=True``, where the reply just before the message refused) the
               same probability on a lower scale, of the message or, where it recasts the
               request (a story, a game, a persona), of the refused request it carries on:
               asking on against a refusal is the conversation-level sign of an attack that
               a message alone does not show; nothing once the user has answered a refusal
               with their role or purpose, or narrowed the request to less than the method
    drift      how far the new message has moved from the conversation's first message and
               from the system prompt's scope, in meaning

Each text is embedded once: a turn embeds its new message alone; the earlier messages, the
system prompt and the policy's examples come from the cache, and the union is the mean of
the recent messages' vectors (embedding the joined text instead costs a second, longer
embedding every turn). Without
the extra, :func:`embedding_detector` says so (refused when asked for, logged once when it was
only the default) and the monitor runs on the rules alone, which record ``drift`` lexically.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from threadline.errors import InputError
from threadline.providers.monitor.intent import IntentClassifier
from threadline.providers.monitor.rules import (
    WINDOW,
    Policy,
    account_after_refusal,
    is_refusal,
    opens,
    recasts,
    refusals,
    refused_last,
)
from threadline.providers.monitor.signals import Signal, clip
from threadline.providers.monitor.trajectory import Trajectory
from threadline.retrieval import dense

log = logging.getLogger("threadline.monitor")

SEMANTIC_FLOOR, SEMANTIC_CEILING = 0.50, 0.80  # cosine → score 0 … 1 (tuned on dev)
# probability → score 0 … 1, for the message as it comes and once the model has refused
# (both chosen on the tuning splits: docs/safety.md)
INTENT_FLOOR, INTENT_CEILING = 0.70, 1.0
# ``reach``: the classifier's reading counts only for a request within this cosine of a
# forbidden example it learnt from; far from all of them (real chat: code, marketing, "Perfect,
# thank you.") its probability is an extrapolation. Off by default (it cost fresh detections);
# this setting halved the false alarms on real conversations (docs/safety.md, "Real
# conversations")
GENERAL_CHAT_REACH = 0.35
PERSIST_FLOOR, PERSIST_CEILING = 0.20, 0.70
# MiniLM puts unrelated sentences at a cosine of ~0.1-0.3: a distance under this is no drift
DRIFT_FLOOR = 0.6
_CACHED = 4096
_FITTED: dict[Callable[[], Any], IntentClassifier] = {}
_FITTING = threading.Lock()


class EmbeddingDetector:
    name = "embeddings"

    def __init__(self, policy: Policy | None = None, *,
                 embedder: Callable[[], Any] = dense.Embedder, window: int = WINDOW,
                 intent: bool = False, reach: float = 0.0) -> None:
        if not 0.0 <= reach <= 1.0:
            raise InputError(f"the intent classifier's reach must be a cosine in [0, 1], not "
                             f"{reach!r}", hint=f"0 (every request read), or "
                                               f"{GENERAL_CHAT_REACH} for general chat")
        self.policy, self.window, self.intent = policy or Policy.default(), window, intent
        self.reach = reach
        self._make = embedder
        self._embedder: Any = None
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._examples: Any = None
        self._intent: IntentClassifier | None = None

    def _embed(self, texts: list[str]) -> list[Any]:
        with self._lock:
            if self._embedder is None:
                self._embedder = self._make()
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
            if missing:
                with _one_thread():
                    found = self._embedder.vectors(missing)
                for text, vector in zip(missing, found, strict=True):
                    self._vectors[text] = vector
                while len(self._vectors) > _CACHED:
                    self._vectors.popitem(last=False)
            for text in texts:
                self._vectors.move_to_end(text)
            return [self._vectors[t] for t in texts]

    def _example_matrix(self) -> Any:
        if self._examples is None:
            import numpy
            self._examples = numpy.stack(self._embed(self.policy.examples))
        return self._examples

    def _intent_classifier(self) -> IntentClassifier:
        if self._intent is None:
            # the shipped weights, or one fit a process for each embedder
            with _FITTING:
                if self._make not in _FITTED:
                    self._embed([])  # the embedder, whose model the shipped weights name
                    model = self._embedder
                    _FITTED[self._make] = IntentClassifier.shipped(
                        self._embed, model=getattr(model, "name", None),
                        dim=_dimension(model))
                self._intent = _FITTED[self._make]
        return self._intent

    def signals(self, trajectory: Trajectory) -> list[Signal]:

        recent = trajectory.recent_users(self.window)
        texts = [trajectory.first, *([trajectory.system] if trajectory.system else []),
                 *recent]
        vectors = self._embed(texts)  # only the new message is not cached already
        first, scope = vectors[0], vectors[1] if trajectory.system else None
        message = vectors[-1]
        # the union, in meaning: the mean of the recent messages' vectors, unit length
        union = _unit_mean(vectors[-len(recent):])
        examples = self._example_matrix()
        closest = float((examples @ union).max())
        # the message alone is a floor: the mean dilutes one sharp message among innocent ones
        alone = float((examples @ message).max())
        out = [Signal("semantic", clip((max(closest, alone) - SEMANTIC_FLOOR)
                                       / (SEMANTIC_CEILING - SEMANTIC_FLOOR)),
                      f"cosine {closest:.2f} (recent messages), {alone:.2f} (this one) to "
                      f"the nearest forbidden example")]
        if self.intent:
            classifier = self._intent_classifier()
            # the union the classifier reads starts at the message that opened the request
            # anew (an account or a narrowed request answering a refusal, ``rules.opens``):
            # what came before it was refused and explained, and its reading is held in the
            # decision's state (policy.py), not read again in every later follow-up
            opened = vectors[-len(recent) + _opened_at(trajectory, len(recent)):]
            read = _unit_mean(opened)
            union_p = _within_reach(classifier, read, self.reach)
            alone_p = _within_reach(classifier, message, self.reach)
            # the union counts where this message adds to it: shards that complete a request
            # raise it; a message after a sensitive one (a thank-you, a question on the side)
            # lowers it, and what the earlier messages read is in the carried risk already
            before_p = classifier.probability(_unit_mean(opened[:-1])) \
                if len(opened) > 1 else 0.0
            adds = union_p >= before_p
            p = max(union_p, alone_p) if adds else alone_p
            out.append(Signal("intent", clip((p - INTENT_FLOOR) / (INTENT_CEILING - INTENT_FLOOR)),
                              f"p {union_p:.2f} (recent messages; {before_p:.2f} before this "
                              f"one{'' if adds else ', so not counted'}), {alone_p:.2f} (this "
                              "one) of a forbidden request" + (
                                  "" if not self.reach else
                                  f"; nearest forbidden example {classifier.reach(read):.2f}, "
                                  f"{classifier.reach(message):.2f} (counted from "
                                  f"{self.reach})")))
            refused = refusals(trajectory)
            if refused:
                # a recast (a story, a game, a persona, a hypothetical) that does not narrow
                # the request carries the refused request on: it reads as the recent user
                # messages that a reply refused (their vectors are cached), where a message
                # that explains or asks something else is read on its own
                asked = [_within_reach(classifier, v, self.reach) for v, refused_it in zip(
                    vectors[-len(recent):-1], _refused_in(trajectory, len(recent) - 1),
                    strict=True) if refused_it] if recasts(trajectory.message) else []
                out.append(_persistence(trajectory, max([p, *asked]), refused))
        start = 1 - float(message @ first) if trajectory.turns else 0.0
        away = 1 - float(message @ scope) if scope is not None else 0.0
        out.append(Signal("drift", clip((max(start, away) - DRIFT_FLOOR) / (1 - DRIFT_FLOOR)),
                          f"meaning: {start:.2f} from the start, {away:.2f} from the scope"))
        return out


def _within_reach(classifier: IntentClassifier, vector: Any, reach: float) -> float:
    """The classifier's probability for ``vector``, or 0 where it lies beyond ``reach`` of
    every forbidden example."""
    if reach and classifier.reach(vector) < reach:
        return 0.0
    return classifier.probability(vector)


def _unit_mean(vectors: list[Any]) -> Any:
    """The mean of ``vectors``, at unit length: the union of their texts, in meaning."""
    import numpy

    mean = numpy.mean(vectors, axis=0)
    return mean / max(float(numpy.linalg.norm(mean)), 1e-9)


def _opened_at(trajectory: Trajectory, count: int) -> int:
    """Where, among the last ``count`` user messages (the new one last), the union starts:
    just after the latest that opened a request anew (``rules.opens``), whose own reading
    is held, or at the new message where it opens one; 0 where none did."""
    texts = trajectory.recent_users(count)
    start = len(trajectory.turns) + 1 - len(texts)  # the first one's index in the turns
    for n in range(len(texts) - 1, 0, -1):
        turns = trajectory.turns[:start + n]
        if turns and opens(Trajectory(texts[n], turns)):
            return min(n + 1, len(texts) - 1)
    return 0


def _refused_in(trajectory: Trajectory, last: int) -> list[bool]:
    """For each of the last ``last`` earlier user messages, whether its reply refused."""
    turns = trajectory.turns[-last:] if last > 0 else ()
    return [t.reply is not None and is_refusal(t.reply) for t in turns]


def _persistence(trajectory: Trajectory, p: float, refused: int) -> Signal:
    """Pressing on against a refusal (the reply just before the message refused): a request
    half as plain is enough then (``p``: the new message's reading or, where it recasts the
    request, that of the recent requests that were refused, whichever is plainer). Not once
    the model has answered since (the message follows an answer), nor where the user has
    answered the refusal with who they are or why they ask, or narrowed the request: a
    wrongly refused user does that, and is no attacker pressing on
    (``rules.account_after_refusal``)."""
    if not refused_last(trajectory):
        return Signal("persistence", 0.0,
                      f"after {refused} refusals, the model has answered since")
    explained = account_after_refusal(trajectory)
    if explained is not None:
        return Signal("persistence", 0.0,
                      f"after {refused} refusals, the user explained: {explained[:60]!r}")
    return Signal("persistence", clip((p - PERSIST_FLOOR) / (PERSIST_CEILING - PERSIST_FLOOR)),
                  f"p {p:.2f} of a forbidden request after {refused} refusals")


def _dimension(embedder: Any) -> int | None:
    try:
        return int(embedder.dimension)
    except (AttributeError, TypeError, ValueError):  # an application's embedder may not say
        return None


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """PyTorch on one thread while a turn embeds its message: one short sentence gains
    nothing from intra-op threads, and on a busy machine they cost it 5x (bench/monitor_cost.py:
    a median of 21 ms on one thread against 111 ms on two, at a load of 3.7 on 2 cores)."""
    try:
        import torch
    except ImportError:  # an embedder of the application's, without PyTorch
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def embedding_detector(policy: Policy | None = None, *, enabled: bool | None = None,
                       intent: bool = False, reach: float = 0.0) -> EmbeddingDetector | None:
    """The embedding detector where the dense extra is installed: always when ``enabled``
    (refused without the extra), never when False, and when None where it is installed
    (saying once in the log that the monitor runs on the rules alone where it is not)."""
    if enabled is False:
        return None
    if not dense.available():
        if enabled:
            raise InputError("the monitor's embedding detector needs the dense extra "
                             "(PyTorch and sentence-transformers)",
                             hint="pip install 'threadline[dense]', or run the monitor on "
                                  "its rules alone")
        _rules_only()
        return None
    return EmbeddingDetector(policy, intent=intent, reach=reach)


@functools.cache
def _rules_only() -> None:
    log.warning("the trajectory monitor runs on its rules alone: the embedding detector "
                "needs the dense extra (pip install 'threadline[dense]')")
