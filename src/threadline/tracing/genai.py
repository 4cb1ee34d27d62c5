"""OpenTelemetry's GenAI semantic conventions, as threadline's spans use them.

The names follow the conventions' "Semantic conventions for generative client AI spans"
(status: Development; docs/observability.md says which version was read): the inference span
is named ``{gen_ai.operation.name} {gen_ai.request.model}`` and the tool span
``execute_tool {gen_ai.tool.name}``. Messages, where their capture is opted in, are recorded
as JSON strings in the conventions' input and output message schemas (roles, and parts of
type ``text``, ``tool_call`` and ``tool_call_response``), since span attributes cannot hold
structured values in the Python SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from threadline.models.base import Completion
from threadline.request import Message

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
CONVERSATION = "gen_ai.conversation.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

# a model id's prefix (threadline's backend) → gen_ai.provider.name: a well-known value where
# one applies ("openai" names the OpenAI API's flavour, which every OpenAI-compatible server
# speaks), else a name of threadline's own
PROVIDERS = {"anthropic": "anthropic", "openai-compatible": "openai",
             "llama.cpp": "llama.cpp", "scripted": "threadline.scripted"}


def provider_and_model(model_id: str) -> tuple[str, str]:
    """(gen_ai.provider.name, gen_ai.request.model) of threadline's ``backend:model`` id."""
    backend, colon, model = model_id.partition(":")
    if not colon:
        return PROVIDERS.get(model_id, model_id), model_id
    return PROVIDERS.get(backend, backend), model


def cache_written(completion: Completion) -> int | None:
    """Input tokens the provider says it wrote to its cache (Anthropic's
    ``cache_creation_input_tokens``); None where the provider reports no such figure."""
    usage = completion.extra.get("usage")
    if isinstance(usage, Mapping):
        written = usage.get("cache_creation_input_tokens")
        if isinstance(written, int):
            return written
    return None


def input_messages(messages: Sequence[Message]) -> str:
    """The request's messages in the conventions' input schema, as JSON."""
    return _json([_message(m) for m in messages])


def output_messages(completion: Completion) -> str:
    """The model's answer in the conventions' output schema, as JSON."""
    parts: list[dict[str, Any]] = []
    if completion.text:
        parts.append({"type": "text", "content": completion.text})
    parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
              for c in completion.tool_calls]
    return _json([{"role": "assistant", "parts": parts,
                   "finish_reason": completion.finish_reason}])


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response",
                                           "id": message.tool_call_id,
                                           "result": message.content}]}
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "content": message.content})
    parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": dict(c.arguments)}
              for c in message.tool_calls]
    return {"role": message.role, "parts": parts}


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
