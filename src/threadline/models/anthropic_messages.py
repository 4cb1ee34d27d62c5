"""A model behind Anthropic's Messages API, or a server that speaks it (llama.cpp's
``llama-server`` serves ``/v1/messages``), over the official ``anthropic`` SDK.

The request is rendered by :func:`~threadline.render.anthropic.render_anthropic`: its cache
points become ``cache_control`` breakpoints, at most four, none where the prefix before it is
shorter than the model's minimum cacheable length (from the ``anthropic-5m`` / ``anthropic-1h``
pricing profile, whichever the TTL setting names), each with that TTL. The call streams
(``on_text`` sees text as it arrives; tool calls are read from ``tool_use`` blocks), and what is
recorded is the payload exactly as sent, and the usage exactly as the server reported it
(``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens``,
``output_tokens``) beside threadline's own counts.

Errors become threadline's: overloaded (529) and rate-limited (429, with its ``retry-after``)
exit 7, a request over the context window is :class:`~threadline.errors.PromptTooLong`, a bad
key :class:`~threadline.errors.ProviderAuthFailed`, a server that does not answer
:class:`~threadline.errors.ModelUnavailable`. Each carries the payload it was sent with, so the
failed call's record holds it too. The SDK's own retries are off: a failure is recorded, and
the turn is answered again by the caller (which never sends the message twice).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from threadline.calls import SentRequest, Usage
from threadline.errors import (
    InputError,
    ModelError,
    ModelUnavailable,
    PromptTooLong,
    ProviderAuthFailed,
    ProviderError,
    ProviderOverloaded,
    ProviderRateLimited,
)
from threadline.models.base import (
    Completion,
    OnText,
    RequestedCall,
    Stopwatch,
    estimate_tokens,
    sent_again_if_closed,
)
from threadline.render.anthropic import render_anthropic
from threadline.request import Request
from threadline.settings import CACHE_TTLS

# the reason a message stopped, in the terms Completion uses
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
           "tool_use": "tool_calls"}
_SDK_ARGUMENTS = frozenset({"model", "max_tokens", "messages", "stream", "system", "tools",
                            "tool_choice", "stop_sequences", "metadata"})
_USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                 "output_tokens")
_TOO_LONG = re.compile(r"too long|exceeds? the (available )?context|context (size|length|window)",
                       re.IGNORECASE)


def pricing_profile(ttl: str) -> str:
    """The pricing profile of a cache TTL: what a breakpoint's write costs, and the minimums."""
    return "anthropic-1h" if ttl == "1h" else "anthropic-5m"


@cache
def _profile_table(name: str) -> dict[str, Any]:
    # the same data file the pricing code reads (cache/profiles.toml), read as data: the
    # pricing code sits in a layer above the models
    text = resources.files("threadline.cache").joinpath("profiles.toml").read_text("utf-8")
    table = tomllib.loads(text).get(name)
    return table if isinstance(table, dict) else {}


def minimum_prefix(model: str, ttl: str = "5m") -> int:
    """The shortest prefix the provider caches for ``model``: its own minimum where the
    pricing profile lists one (by model-name prefix), else the profile's default."""
    table = _profile_table(pricing_profile(ttl))
    for prefix, tokens in (table.get("min_prefix_by_model") or {}).items():
        if model.startswith(prefix):
            return int(tokens)
    return int(table.get("min_prefix_tokens", 1024))


class AnthropicModel:
    """A :class:`~threadline.models.base.ModelBackend` over the ``anthropic`` SDK."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 max_tokens: int = 1024, ttl: str = "5m", temperature: float | None = None,
                 min_cacheable_tokens: int | None = None, timeout_s: float = 120.0,
                 max_retries: int = 0, context_window: int | None = None,
                 params: Mapping[str, Any] | None = None) -> None:
        try:
            import anthropic
        except ImportError as err:
            raise InputError("the anthropic backend needs the anthropic package",
                             hint="pip install 'threadline[anthropic]'") from err
        if not model:
            raise InputError("the anthropic backend needs a model name",
                             hint="set THREADLINE_ANTHROPIC_MODEL, e.g. claude-sonnet-4-6")
        if ttl not in CACHE_TTLS:
            raise InputError(f"the cache TTL must be 5m or 1h; got {ttl!r}")
        self.model = model
        self.model_id = f"anthropic:{model}"
        self.context_window = context_window  # unknown unless told: nothing compacts by it
        self.base_url = base_url.rstrip("/") if base_url else None
        self.ttl = ttl
        self.profile = pricing_profile(ttl)
        self.min_cacheable_tokens = min_cacheable_tokens if min_cacheable_tokens is not None \
            else minimum_prefix(model, ttl)
        self._anthropic = anthropic
        # a compatible server may need no key; the SDK wants one all the same
        self._client = anthropic.Anthropic(base_url=self.base_url, api_key=api_key or "unused",
                                           timeout=timeout_s, max_retries=max_retries)
        self.params: dict[str, Any] = dict(params or {})
        self.max_tokens = max_tokens
        if temperature is not None:
            self.params["temperature"] = temperature

    @property
    def provider(self) -> str:
        return f"the Anthropic-compatible server at {self.base_url}" if self.base_url \
            else "Anthropic's API"

    def count_tokens(self, text: str) -> int:
        """An estimate: the provider's tokenizer is not at hand."""
        return estimate_tokens(text)

    def payload(self, request: Request) -> dict[str, Any]:
        """The Messages API payload for ``request``, as :meth:`complete` sends it."""
        return render_anthropic(request, model=self.model, max_tokens=self.max_tokens,
                                min_cacheable_tokens=self.min_cacheable_tokens, ttl=self.ttl,
                                stream=True, **self.params)

    def complete(self, request: Request, *, on_text: OnText | None = None) -> Completion:
        payload = self.payload(request)
        sent = SentRequest(model=self.model_id, messages=tuple(payload["messages"]),
                           params={k: v for k, v in payload.items() if k != "messages"})
        try:
            return sent_again_if_closed(lambda: self._call(payload, sent, on_text),
                                        self._anthropic.APIConnectionError)
        except self._anthropic.APIError as err:
            mapped = self._mapped(err)
            mapped.sent_request = sent
            raise mapped from err

    def _call(self, payload: dict[str, Any], sent: SentRequest,
              on_text: OnText | None) -> Completion:
        watch = Stopwatch()
        text: list[str] = []
        thinking: list[str] = []
        blocks: dict[int, dict[str, Any]] = {}  # tool_use blocks by index, input as JSON text
        usage: dict[str, Any] = {}
        stop_reason: str | None = None
        # what every SDK version since 0.40 takes by name; the rest (temperature, which newer
        # versions no longer name) rides in the same JSON body as extra_body
        named = {k: v for k, v in payload.items() if k in _SDK_ARGUMENTS}
        extra_body = {k: v for k, v in payload.items() if k not in _SDK_ARGUMENTS}
        with self._client.messages.create(**named, extra_body=extra_body or None) as stream:
            for event in stream:
                kind = event.type
                if kind == "message_start":
                    usage.update(_reported(event.message.usage))
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        watch.first_token()
                        blocks[event.index] = {"id": block.id, "name": block.name, "input": ""}
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        watch.first_token()
                        text.append(delta.text)
                        if on_text is not None:
                            on_text(delta.text)
                    elif delta.type == "input_json_delta" and event.index in blocks:
                        blocks[event.index]["input"] += delta.partial_json
                    elif delta.type == "thinking_delta":
                        watch.first_token()
                        thinking.append(delta.thinking)
                elif kind == "message_delta":
                    stop_reason = event.delta.stop_reason or stop_reason
                    usage.update(_reported(event.usage))  # the final counts, where given
        extra: dict[str, Any] = {"stop_reason": stop_reason, "cache_ttl": self.ttl}
        if self.base_url:
            extra["endpoint"] = self.base_url
        if thinking:
            extra["thinking"] = "".join(thinking)
        counted = Usage()
        if not usage:
            extra["usage"] = "not reported by the server"
        else:
            extra["usage"] = usage  # as reported: cache writes and reads apart
            read = usage.get("cache_read_input_tokens") or 0
            written = usage.get("cache_creation_input_tokens") or 0
            counted = Usage(prompt_tokens=(usage.get("input_tokens") or 0) + read + written,
                            cached_tokens=read, completion_tokens=usage.get("output_tokens") or 0)
        calls = tuple(_requested(blocks[i]) for i in sorted(blocks))
        finish = _FINISH.get(stop_reason or "", "stop")
        if calls and finish == "stop":
            finish = "tool_calls"
        return Completion(text="".join(text), sent=sent, usage=counted,
                          timings=watch.timings(), finish_reason=finish, extra=extra,
                          tool_calls=calls)

    def _mapped(self, err: Exception) -> ModelError:
        """The threadline error for an SDK error: what went wrong, and what to do."""
        sdk = self._anthropic
        if isinstance(err, sdk.APITimeoutError):
            return ModelUnavailable(f"{self.provider} did not answer in time ({err})",
                                    hint="retry; the turn is recorded as failed")
        if isinstance(err, sdk.APIConnectionError):
            return ModelUnavailable(f"{self.provider} could not be reached ({err})",
                                    hint="check THREADLINE_ANTHROPIC_BASE_URL and that the "
                                         "server is running; the turn is recorded as failed")
        if not isinstance(err, sdk.APIStatusError):
            return ProviderError(f"{self.provider} failed the call ({err})")
        # an error event mid-stream arrives on a 200 response: its type says what it was
        status = err.status_code if err.status_code >= 400 else None
        error_type, message = _error_of(err.body, str(err))
        detail = message if status is None else f"HTTP {status}: {message}"
        if error_type == "overloaded_error" or status == 529:
            return ProviderOverloaded(self.provider, detail, status=status)
        if error_type == "rate_limit_error" or status == 429:
            return ProviderRateLimited(self.provider, detail, status=status,
                                       retry_after_s=_retry_after(err.response.headers))
        if error_type in ("authentication_error", "permission_error") or status in (401, 403):
            return ProviderAuthFailed(self.provider, detail, key_env="ANTHROPIC_API_KEY",
                                      status=status, error_type=error_type)
        if error_type in ("exceed_context_size_error", "request_too_large") or status == 413 \
                or (status == 400 and _TOO_LONG.search(message)):
            return PromptTooLong(self.provider, detail)
        if error_type == "not_found_error" or status == 404:
            return ModelUnavailable(f"{self.provider} has no model {self.model!r} ({detail})",
                                    hint="check THREADLINE_ANTHROPIC_MODEL")
        return ProviderError(f"{self.provider} refused the call ({detail})", status=status,
                             error_type=error_type)


def _reported(usage: Any) -> dict[str, Any]:
    """The usage fields an event carries (None where the server left one out)."""
    if usage is None:
        return {}
    found = {name: getattr(usage, name, None) for name in _USAGE_FIELDS}
    creation = getattr(usage, "cache_creation", None)  # writes by TTL, where reported
    if creation is not None:
        found["cache_creation"] = {k: v for k, v in creation.model_dump().items()
                                   if v is not None}
    return {k: v for k, v in found.items() if v is not None}


def _error_of(body: object, fallback: str) -> tuple[str | None, str]:
    """The error's type and message from its body (``{"type": "error", "error": {...}}``)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind = error.get("type")
        message = error.get("message")
        return (kind if isinstance(kind, str) else None,
                message if isinstance(message, str) and message else fallback)
    return None, fallback


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue  # an HTTP date: rare here, and the message still says to retry
        if seconds >= 0:
            return seconds
    return None


def _requested(block: dict[str, Any]) -> RequestedCall:
    try:
        arguments = json.loads(block["input"] or "{}")
    except json.JSONDecodeError:
        arguments = block["input"]
    if not isinstance(arguments, dict):
        arguments = block["input"]
    return RequestedCall(block["id"], block["name"], arguments)
