"""The trajectory monitor: a conversation-level safety check, as a context provider.

    trajectory.py  Trajectory          the conversation as the monitor reads it
    signals.py     Signal, Detector    what detectors return, and their protocol
    rules.py       RuleDetector        lexicons and patterns over the trajectory; Policy
    embeddings.py  EmbeddingDetector   the shipped MiniLM model (the dense extra)
    classifier.py  ModelClassifier     a model on any backend, as an option
    policy.py      RiskPolicy          signals → risk → actions
    provider.py    TrajectoryMonitor   the provider, and the tool guard it lends the harness

docs/safety.md says what it catches, what it does not, and what it costs.
"""

from threadline.providers.monitor.classifier import ModelClassifier
from threadline.providers.monitor.embeddings import EmbeddingDetector, embedding_detector
from threadline.providers.monitor.policy import Decision, RiskPolicy
from threadline.providers.monitor.provider import TrajectoryMonitor
from threadline.providers.monitor.rules import Policy, RuleDetector
from threadline.providers.monitor.signals import Detector, Signal
from threadline.providers.monitor.trajectory import Trajectory

__all__ = ["Decision", "Detector", "EmbeddingDetector", "ModelClassifier", "Policy",
           "RiskPolicy", "RuleDetector", "Signal", "Trajectory", "TrajectoryMonitor",
           "embedding_detector"]
