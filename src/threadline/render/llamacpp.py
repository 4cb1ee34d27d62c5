"""llama.cpp: the GGUF's own chat template renders the request, its tokenizer makes token ids.

Rendering with the template the model was trained on matters twice: a subtly wrong template
degrades quality in ways that look like a model problem, and the rendered tokens are what the
KV cache reuses, so prefix reuse can be measured exactly, in tokens.
"""

from __future__ import annotations

from typing import Any

from threadline.errors import ModelUnavailable
from threadline.request import Request


class ChatTemplate:
    """The chat template and tokenizer of a loaded ``llama_cpp.Llama``."""

    def __init__(self, llm: Any, source: str) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        meta = llm.metadata
        template = meta.get("tokenizer.chat_template")
        if not template:
            raise ModelUnavailable(f"{source} has no chat template in its metadata",
                                   hint="use a GGUF converted with its tokenizer's template")
        self._llm = llm
        self._add_bos = meta.get("tokenizer.ggml.add_bos_token", "false") == "true"
        self._formatter = Jinja2ChatFormatter(template, eos_token=self._text(llm.token_eos()),
                                              bos_token=self._text(llm.token_bos()))

    def _text(self, token: int) -> str:
        return str(self._llm.detokenize([token], special=True).decode("utf-8", "replace"))

    def render(self, request: Request) -> tuple[str, list[int]]:
        """The prompt text and its token ids."""
        messages: Any = request.openai_messages()
        tools: Any = [t.to_openai() for t in request.tools] or None
        prompt = str(self._formatter(messages=messages, tools=tools).prompt)
        return prompt, self.tokenize(prompt, add_bos=self._add_bos)

    def tokenize(self, text: str, *, add_bos: bool = False) -> list[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))
