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


MODELS: dict[str, Callable[[Settings], ModelBackend]] = {
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
