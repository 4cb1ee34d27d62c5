"""Safety script files run once: detection and false alarms per file, and which scripts.

What is measured
    Each file named (a registered split by name, or any script file by path: a sealed one is
    run this way, once, when its round is fixed) through ``threadline.eval.safety.evaluate``
    with the scripted model, the monitor as ``standard.default_monitor`` builds it: with the
    embeddings, once with the intent classifier and once without; with ``--no-embeddings``,
    the rules alone. Per file and setting: attacks detected per conversation and per message
    alone, false alarms both ways, the single-turn versions' detection, prefix reuse on ÷ off,
    and the ids of the attacks missed and the look-alikes flagged.

    To compare two versions of the monitor, run this script from each checkout on the same
    files (``PYTHONPATH=that/src``); the files are read from the paths given, so an older
    checkout can run a newer file.

    .venv/bin/python bench/safety_files.py blind9 overrefusal8
    .venv/bin/python bench/safety_files.py src/threadline/eval/safety_scripts/blind10.toml
    .venv/bin/python bench/safety_files.py --quick --json      # dev, rules only
    .venv/bin/python bench/safety_files.py dev seen --reach 0.35  # the intent classifier's reach
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from threadline.eval import safety
from threadline.eval.safety import SPLITS, evaluate, load_scripts
from threadline.standard import default_monitor

FOLDER = Path(safety.__file__).with_name("safety_scripts")


def _file(name: str) -> tuple[str, Path]:
    path = Path(name)
    if path.suffix == ".toml":
        return path.stem, path
    return name, FOLDER / f"{name}.toml"


def _flagged(rows: list[dict[str, Any]], kind: str, key: str) -> list[str]:
    return sorted(r["id"] for r in rows
                  if r["kind"] == kind and r[key]["first_detection"] is not None)


def summary(report: dict[str, Any]) -> dict[str, Any]:
    rows = report["scripts"]
    attacks = [r["id"] for r in rows if r["kind"] == "attack"]
    detected = _flagged(rows, "attack", "conversation")
    flagged = _flagged(rows, "benign", "conversation")
    return {"tuned_on": report["tuned_on"], "attacks": len(attacks),
            "benign": sum(r["kind"] == "benign" for r in rows), "detected": len(detected),
            "detected_per_message": len(_flagged(rows, "attack", "per_message")),
            "false_alarms": len(flagged),
            "false_alarms_per_message": len(_flagged(rows, "benign", "per_message")),
            "single_turn_detection_rate": report["single_turn_detection_rate"],
            "reuse_bytes_ratio": report["reuse_bytes"]["ratio"],
            "missed": sorted(set(attacks) - set(detected)), "flagged": flagged}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help=f"split names ({', '.join(SPLITS)}) or "
                                                 "paths of script files")
    parser.add_argument("--no-embeddings", action="store_true",
                        help="the rules alone (no dense extra needed)")
    parser.add_argument("--quick", action="store_true", help="dev, the rules alone")
    parser.add_argument("--reach", type=float, default=0.0,
                        help="the intent classifier's reach (a cosine; 0: every request)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    names = ["dev"] if args.quick else args.files
    if not names:
        parser.error("name at least one split or script file")
    files = dict(_file(name) for name in names)
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        parser.error(f"no such script file: {', '.join(missing)}")
    scripts = {name: load_scripts(name, path) for name, path in files.items()}
    settings = {"rules": False} if args.quick or args.no_embeddings else \
        {"intent": True, "no_intent": False}
    out: dict[str, Any] = {"benchmark": "safety_files", "files": list(files), "settings": {}}
    for setting, intent in settings.items():
        monitor = default_monitor(False if setting == "rules" else None, intent=intent,
                                  reach=args.reach)
        with tempfile.TemporaryDirectory() as directory:
            report = evaluate(list(files), monitor, Path(directory), planted=False,
                              scripts=scripts)
        out["settings"][setting] = {name: summary(split)
                                    for name, split in report["splits"].items()}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for setting, found in out["settings"].items():
        for name, s in found.items():
            attacks = f"detected {s['detected']}/{s['attacks']} (per message " \
                f"{s['detected_per_message']}), " if s["attacks"] else ""
            print(f"{name} [{setting}]: {attacks}false alarms {s['false_alarms']}/{s['benign']}"
                  f" (per message {s['false_alarms_per_message']})")
            for label in ("missed", "flagged"):
                if s[label]:
                    print(f"  {label}: {', '.join(s[label])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
