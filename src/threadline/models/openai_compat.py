"""A model behind an OpenAI-compatible endpoint: OpenAI itself, or a serving engine (vLLM,
SGLang, llama.cpp's server) running on one or more machines.

Each request goes out with ``prompt_cache_key`` (stable per conversation branch) and, where
there are several endpoints, to the one a rendezvous hash of that key picks: follow-ups land
where their prefix is already cached, and adding or removing an endpoint moves only the
conversations that hashed to it. An endpoint that refuses the connection is skipped for the
next one in the same order, so affinity never makes one machine a single point of failure.

The call streams (``on_text`` sees text as it arrives; time to first token is measured), and
what is recorded is the payload exactly as sent, plus the endpoint that served it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from threadline.calls import SentRequest, Usage
from threadline.errors import InputError, ModelUnavailable
from threadline.models.base import (
    Completion,
    OnText,
    RequestedCall,
    Stopwatch,
    estimate_tokens,
    sent_again_if_closed,
)
from threadline.render.openai import render_openai
from threadline.request import HistoryMark, Request


def rendezvous(key: str, endpoints: Sequence[str]) -> list[str]:
    """``endpoints`` in the order ``key`` prefers them (highest random weight first)."""
    def weight(endpoint: str) -> bytes:
        return hashlib.blake2b(f"{endpoint}\n{key}".encode(), digest_size=8).digest()
    return sorted(endpoints, key=weight, reverse=True)


class OpenAICompatibleModel:
    """A :class:`~threadline.models.base.ModelBackend` over the ``openai`` SDK."""

    def __init__(self, model: str, endpoints: Sequence[str], *, api_key: str | None = None,
                 max_tokens: int = 512, temperature: float | None = None,
                 timeout_s: float = 120.0, params: Mapping[str, Any] | None = None,
                 context_window: int | None = None) -> None:
        try:
            import openai
        except ImportError as err:
            raise InputError("the OpenAI-compatible backend needs the openai package",
                             hint="pip install 'threadline[openai]'") from err
        if not endpoints:
            raise InputError("the OpenAI-compatible backend needs at least one endpoint URL")
        self.model = model
        self.model_id = f"openai-compatible:{model}"
        self.context_window = context_window  # unknown unless told: nothing compacts by it
        self.endpoints = tuple(url.rstrip("/") for url in endpoints)
        self._openai = openai
        self._clients = {url: openai.OpenAI(base_url=url, api_key=api_key or "unused",
                                            timeout=timeout_s, max_retries=0)
                         for url in self.endpoints}
        self.params: dict[str, Any] = {"max_tokens": max_tokens, **(params or {})}
        if temperature is not None:
            self.params["temperature"] = temperature

    def count_tokens(self, text: str) -> int:
        """An estimate: the endpoint's tokenizer is not at hand."""
        return estimate_tokens(text)

    def route(self, request: Request) -> list[str]:
        """The endpoints to try for ``request``, preferred first."""
        if request.cache_key is None or len(self.endpoints) == 1:
            return list(self.endpoints)
        return rendezvous(request.cache_key, self.endpoints)

    def complete(self, request: Request, *, on_text: OnText | None = None) -> Completion:
        payload = render_openai(request, model=self.model, cache_key=request.cache_key,
                                stream=True, stream_options={"include_usage": True},
                                **self.params)
        refused: list[str] = []
        for endpoint in self.route(request):
            try:
                return sent_again_if_closed(
                    partial(self._call, endpoint, payload, on_text, request.history),
                    self._openai.APIConnectionError)
            except self._openai.APIConnectionError as err:
                refused.append(f"{endpoint} ({err})")
        raise ModelUnavailable(f"no endpoint answered: {'; '.join(refused)}",
                               hint="check that the serving engine is running")

    def _call(self, endpoint: str, payload: dict[str, Any], on_text: OnText | None,
              history: HistoryMark | None) -> Completion:
        watch = Stopwatch()
        stream = self._clients[endpoint].chat.completions.create(**payload)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage, finish = None, "stop"
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    watch.first_token()
                    text.append(delta.content)
                    if on_text is not None:
                        on_text(delta.content)
                for part in delta.tool_calls or ():
                    watch.first_token()
                    call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.id or call["id"]
                    if part.function is not None:
                        call["name"] += part.function.name or ""
                        call["arguments"] += part.function.arguments or ""
                if choice.finish_reason:
                    finish = choice.finish_reason
        sent = SentRequest(model=self.model_id, messages=tuple(payload["messages"]),
                           params={k: v for k, v in payload.items() if k != "messages"},
                           history=history)  # the messages are the request's, in order
        extra: dict[str, Any] = {"endpoint": endpoint}
        counted = Usage()
        if usage is None:
            extra["usage"] = "not reported by the server"
        else:
            details = getattr(usage, "prompt_tokens_details", None)
            counted = Usage(prompt_tokens=usage.prompt_tokens,
                            cached_tokens=getattr(details, "cached_tokens", None) or 0,
                            completion_tokens=usage.completion_tokens)
        return Completion(text="".join(text), sent=sent, usage=counted,
                          timings=watch.timings(), finish_reason=finish, extra=extra,
                          tool_calls=tuple(_requested(calls[i]) for i in sorted(calls)))


def _requested(call: dict[str, Any]) -> RequestedCall:
    try:
        arguments = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError:
        arguments = call["arguments"]
    if not isinstance(arguments, dict):
        arguments = call["arguments"]
    return RequestedCall(call["id"], call["name"], arguments)
