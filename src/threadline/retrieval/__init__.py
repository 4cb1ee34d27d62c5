"""Retrieval: a user's documents kept beside the log, in the same database, searched for a turn.

- ``chunks``: documents into chunks of whole sentences with stable ids (``DOC:cN``,
  ``DOC:cN:sM``, the document id a hash of its text), so a citation holds while its text does;
- ``files``: reading documents from files and folders, refusing what is not text;
- ``corpus``: named corpora, indexed for full text (SQLite FTS5 with BM25, or a PostgreSQL
  tsvector with ``ts_rank_cd``); a corpus added with dense search also keeps each chunk's
  embedding, and its search fuses the lexical and dense rankings by reciprocal rank, ties by
  chunk id, so the same query over the same corpus returns the same passages in order;
- ``dense``: the optional MiniLM embedder (``threadline[dense]``), shipped with its model;
- ``answers``: saved answers, reused with scope: an answer is served again only to the same
  question (exact, or semantically close with the same must-preserve tokens) that found the
  same passages, so it stops being served once the corpus changes what the question finds.
"""
