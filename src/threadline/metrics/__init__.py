"""Prometheus metrics for an engine: turns, calls, tokens, time to first token and turn time by
turn index, compactions, the memory writer, the lease and errors (docs/observability.md).

``registry.Metrics`` owns a registry of its own (never the process-wide one, so engines and
tests do not collide); its ``hook`` is a turn hook and the object itself the engine's observer
(``turn/observe.py``). It needs the ``metrics`` extra (prometheus-client); this module does
not, so callers can ask whether it is there before importing the rest.
"""

from __future__ import annotations

from importlib.util import find_spec

INSTALL_HINT = "pip install 'threadline[metrics]'"


def available() -> bool:
    """Whether prometheus-client is installed."""
    return find_spec("prometheus_client") is not None
