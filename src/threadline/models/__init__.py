"""Model backends, looked up by name in a registry."""

from __future__ import annotations

import os
from collections.abc import Callable

from threadline.errors import InputError
from threadline.models.base import Completion, ModelBackend, OnText
from threadline.models.scripted import ScriptedModel
from threadline.settings import Settings


def _local(settings: Settings) -> ModelBackend:
    from threadline.models.kv import Identity, KVCache
    from threadline.models.llamacpp import LlamaCppModel

    def kv(identity: Identity) -> KVCache:
        return KVCache(identity, memory_bytes=settings.kv_memory_bytes,
                       folder=settings.kv_dir, disk_bytes=settings.kv_disk_bytes)

    return LlamaCppModel(settings.model_path, threads=settings.threads, kv=kv)


def _scripted(settings: Settings) -> ModelBackend:
    return ScriptedModel()


def _openai(settings: Settings) -> ModelBackend:
    from threadline.models.openai_compat import OpenAICompatibleModel

    if not settings.openai_base_urls or not settings.openai_model:
        raise InputError("the openai model needs THREADLINE_OPENAI_BASE_URLS (one or more "
                         "comma-separated endpoint URLs) and THREADLINE_OPENAI_MODEL",
                         hint="e.g. THREADLINE_OPENAI_BASE_URLS=http://gpu-1:8000/v1,"
                              "http://gpu-2:8000/v1 THREADLINE_OPENAI_MODEL=my-model")
    return OpenAICompatibleModel(settings.openai_model, settings.openai_base_urls,
                                 api_key=os.environ.get("OPENAI_API_KEY"))


def _anthropic(settings: Settings) -> ModelBackend:
    from threadline.models.anthropic_messages import AnthropicModel

    api_key = os.environ.get("ANTHROPIC_API_KEY")
    if not settings.anthropic_model or not (api_key or settings.anthropic_base_url):
        raise InputError("the anthropic model needs THREADLINE_ANTHROPIC_MODEL, and "
                         "ANTHROPIC_API_KEY for Anthropic's API or THREADLINE_ANTHROPIC_BASE_URL "
                         "for a server that speaks its Messages API; nothing was sent or saved",
                         hint="e.g. THREADLINE_ANTHROPIC_MODEL=claude-sonnet-4-6 "
                              "ANTHROPIC_API_KEY=sk-ant-..., or "
                              "THREADLINE_ANTHROPIC_BASE_URL=http://127.0.0.1:8080 "
                              "THREADLINE_ANTHROPIC_MODEL=smollm2")
    return AnthropicModel(settings.anthropic_model, base_url=settings.anthropic_base_url,
                          api_key=api_key, max_tokens=settings.anthropic_max_tokens,
                          ttl=settings.anthropic_cache_ttl)


MODELS: dict[str, Callable[[Settings], ModelBackend]] = {
    "anthropic": _anthropic,
    "local": _local,
    "openai": _openai,
    "scripted": _scripted,
}


def create_model(name: str, settings: Settings) -> ModelBackend:
    """Build (and load) the named backend. Loading happens here, before any turn starts, so a
    missing model fails without touching the store."""
    try:
        factory = MODELS[name]
    except KeyError:
        raise InputError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None
    return factory(settings)


__all__ = ["MODELS", "Completion", "ModelBackend", "OnText", "ScriptedModel", "create_model"]
