"""Planted instructions through 1-3 compactions of each kind, and through memory writing.

Each planted instruction in ``threadline.eval.provenance.PLANTS`` (an "answer in French"
override, a password exfiltration, and one that tries to close its fence and open a block of
its own) is put in a tool result, a retrieved document and an imported transcript's tool
message; each conversation is compacted 1, 2 and 3 times with one strategy
(clear_tool_results, window, summary, pin), with a scripted constraint extractor and memory
extractor that try to promote the plant, then the memory writer runs with its most
permissive policy and a later conversation recalls everything stored. Reported, per vector
and strategy: how many request messages showed the plant and how many showed it inside an
untrusted fence only; whether it reached the system prompt, the pinned segment or the
standing constraints; and how many memory entries hold it, trusted and untrusted.

Target (issue 20): 0 stored as trusted memory; 100% still marked untrusted after 1-3
compactions of each kind.

    .venv/bin/python bench/provenance.py            # every case: 108 conversations
    .venv/bin/python bench/provenance.py --quick    # one plant, one and three compactions
    .venv/bin/python bench/provenance.py --json
"""

from __future__ import annotations

import argparse
import json
import sys

from threadline.eval.provenance import measure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one plant, 1 and 3 compactions")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.quick)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'vector':<12} {'strategy':<19} {'cases':>5} {'compacted':>9} {'shown':>6} "
          f"{'fenced':>6} {'after':>6} {'pinned':>6} {'trusted':>7} {'untrusted':>9}")
    for r in report["rows"]:
        print(f"{r['vector']:<12} {r['strategy']:<19} {r['cases']:>5} {r['compactions']:>9} "
              f"{r['appearances']:>6} {r['marked']:>6} {r['after_compaction']:>6} "
              f"{r['in_pinned'] + r['in_constraints']:>6} {r['trusted_memory']:>7} "
              f"{r['untrusted_memory']:>9}")
    share = report["marked_share"]
    print(f"\n{report['cases_ok']}/{report['cases']} cases clean; "
          f"{report['marked']}/{report['appearances']} appearances fenced "
          f"({'n/a' if share is None else f'{share:.0%}'}); "
          f"{report['trusted_memory']} trusted memory entries hold a plant "
          f"({report['untrusted_memory']} untrusted); "
          f"{report['compactions_applied']}/{report['compactions_asked']} compactions applied; "
          f"{report['seconds']} s")
    for leak in report["leaks"]:
        print("LEAK", leak)
    return 0 if not report["leaks"] else 1


if __name__ == "__main__":
    sys.exit(main())
