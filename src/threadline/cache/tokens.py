"""Counting tokens without a network: the local model's own tokenizer, or a stand-in.

``tiktoken`` downloads its encodings at run time, so threadline counts with the GGUF's
vocabulary through llama.cpp (loaded vocabulary-only: no weights, milliseconds to open), and
falls back to the scripted model's word tokenizer when llama.cpp is not installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from threadline.errors import ModelUnavailable
from threadline.models.scripted import TOKEN_PATTERN, token_id


class Tokenizer(Protocol):
    name: str

    def tokenize(self, text: str) -> Sequence[int]: ...


class LlamaTokenizer:
    """The tokenizer of a GGUF model (SmolLM2's by default), vocabulary only."""

    def __init__(self, model_path: Path | None = None) -> None:
        from threadline.models.llamacpp import _check_model_file, default_model_path

        path = model_path or default_model_path()
        _check_model_file(path)
        try:
            import llama_cpp
            from llama_cpp._utils import suppress_stdout_stderr
        except ImportError as err:
            raise ModelUnavailable("llama-cpp-python is not installed") from err
        with suppress_stdout_stderr(disable=False):  # it warns about the context it skips
            self._llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        self.name = f"llama.cpp:{path.stem}"

    def tokenize(self, text: str) -> Sequence[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


class WordTokenizer:
    """Words, punctuation marks and runs of whitespace: a rough stand-in (about 1.3 per word)."""

    name = "words"

    def tokenize(self, text: str) -> Sequence[int]:
        return [token_id(t) for t in TOKEN_PATTERN.findall(text)]


def default_tokenizer() -> Tokenizer:
    try:
        return LlamaTokenizer()
    except ModelUnavailable:
        return WordTokenizer()
