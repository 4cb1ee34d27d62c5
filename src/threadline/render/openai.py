"""The OpenAI chat-completions payload (also what vLLM, SGLang and llama.cpp's server take).

OpenAI caches prefixes automatically; what a request controls is that its prefix is stable
(the assembler's job) and that follow-ups reach the machine holding it: ``prompt_cache_key``,
stable per conversation branch.
"""

from __future__ import annotations

import hashlib
from typing import Any

from threadline.request import Request


def prompt_cache_key(conversation_id: str, branch: str) -> str:
    """A stable routing key per conversation branch (no raw ids leave the process)."""
    digest = hashlib.blake2b(f"{conversation_id}/{branch}".encode(), digest_size=12)
    return "tl-" + digest.hexdigest()


def render_openai(request: Request, *, model: str, cache_key: str | None = None,
                  **params: Any) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments for ``request``. Tools keep the assembler's
    order (sorted by name), so the payload is byte-stable across processes."""
    payload: dict[str, Any] = {"model": model, "messages": request.openai_messages()}
    if request.tools:
        payload["tools"] = [tool.to_openai() for tool in request.tools]
        if request.tool_choice != "auto":
            payload["tool_choice"] = request.tool_choice
    if cache_key is not None:
        payload["prompt_cache_key"] = cache_key
    payload.update(params)
    return payload
