"""Model backends, looked up by name in a registry."""

from __future__ import annotations

from collections.abc import Callable

from threadline.errors import InputError
from threadline.models.base import Completion, ModelBackend, OnText
from threadline.models.scripted import ScriptedModel
from threadline.settings import Settings


def _local(settings: Settings) -> ModelBackend:
    from threadline.models.llamacpp import LlamaCppModel

    return LlamaCppModel(settings.model_path, threads=settings.threads)


def _scripted(settings: Settings) -> ModelBackend:
    return ScriptedModel()


MODELS: dict[str, Callable[[Settings], ModelBackend]] = {
    "local": _local,
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
