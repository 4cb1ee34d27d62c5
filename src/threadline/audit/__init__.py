"""The Parquet audit trail: the log exported by UTC day, with a manifest, and checked again.

``export`` writes the tables ``turns``, ``calls``, ``requests``, ``compactions`` and
``memory_writes`` (``audit/tables.py``) to a directory or an S3 prefix (``audit/target.py``);
``verify`` checks the files against the manifest and the exported items against the log's
hash chains. Needs the ``audit`` extra (pyarrow). See docs/audit.md.
"""

from __future__ import annotations

from threadline.audit.export import ExportOptions, ExportResult, export
from threadline.audit.rows import Pricing
from threadline.audit.target import S3Options, Target, open_target
from threadline.audit.verify import Finding, Verified, verify

__all__ = ["ExportOptions", "ExportResult", "Finding", "Pricing", "S3Options", "Target",
           "Verified", "export", "open_target", "verify"]
