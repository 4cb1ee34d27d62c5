"""The rewrite hop: a follow-up plus its conversation → a standalone query that keeps its
anchors (``anchors``), from rewriters raced under a deadline (``race``): one without a model
(``deterministic``) and one over any model backend (``model``)."""

from threadline.rewrite.deterministic import Turn
from threadline.rewrite.race import DEFAULT_DEADLINE_S, DETERMINISTIC, Rewriter, RewriteResult, race

__all__ = ["DEFAULT_DEADLINE_S", "DETERMINISTIC", "RewriteResult", "Rewriter", "Turn", "race"]
