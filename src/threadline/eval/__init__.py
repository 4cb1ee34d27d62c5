"""Offline evaluators: they measure threadline's parts on recorded or external data.

- ``replay``: real conversations replayed turn by turn through assembly policies, and priced;
- ``locomo``: long-term memory recall on files in LoCoMo's format;
- ``canard``: the follow-up rewriters on files in CANARD's format;
- ``cast``: TREC CAsT topics as rewrite examples, scored the same way;
- ``splits``: which of that data the rewriter was developed on (dev) and which is held out;
- ``files``: reading such a benchmark file, or saying what is wrong with it;
- ``multiturn``: whole conversations under Lost in Conversation's conditions, each a
  recorded threadline conversation, graded by program, with distribution metrics
  (docs/eval.md).

They sit above the turn pipeline (``replay`` assembles requests as a turn does), so the
runtime (engine, turn, providers, server) never imports this package; only the CLI's ``eval``
and ``cost replay`` commands and the benchmarks do. ``tests/eval/test_isolation.py`` checks it.
"""
