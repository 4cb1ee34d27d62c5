"""The model a run talks to, built from its config: a backend with the reply cap and the
temperature applied, and a way to set each trial's sampling seed.

The backends are threadline's own (``models/``), configured from the same settings as
``--model`` (THREADLINE_MODEL_PATH, THREADLINE_OPENAI_*, THREADLINE_ANTHROPIC_*). A seed
reaches the sampler where the backend has one: llama.cpp's, and the ``seed`` parameter of an
OpenAI-compatible server; Anthropic's API has none (the record says so), and the scripted
model needs none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from threadline.errors import InputError
from threadline.models.base import ModelBackend
from threadline.models.scripted import ScriptedModel
from threadline.settings import Settings


@dataclass(frozen=True)
class ModelConfig:
    backend: str = "local"
    reply_tokens: int = 256
    temperature: float = 0.7


@dataclass
class EvalModel:
    model: ModelBackend
    reseed: Callable[[int], None] = field(default=lambda seed: None)
    seeded: bool = False  # whether a seed reaches the sampler

    def record(self, config: ModelConfig) -> dict[str, Any]:
        return {"backend": config.backend, "model": self.model.model_id,
                "reply_tokens": config.reply_tokens, "temperature": config.temperature,
                "seeded": self.seeded}


def _local(settings: Settings, config: ModelConfig) -> EvalModel:
    from threadline.models.llamacpp import LlamaCppModel, Sampling

    model = LlamaCppModel(settings.model_path, threads=settings.threads, sampling=Sampling(
        max_tokens=config.reply_tokens, temperature=config.temperature, seed=0))

    def reseed(seed: int) -> None:
        model.sampling = replace(model.sampling, seed=seed)
    return EvalModel(model, reseed, seeded=True)


def _openai(settings: Settings, config: ModelConfig) -> EvalModel:
    from threadline.models.openai_compat import OpenAICompatibleModel

    if not settings.openai_base_urls or not settings.openai_model:
        raise InputError("the openai backend needs THREADLINE_OPENAI_BASE_URLS and "
                         "THREADLINE_OPENAI_MODEL", hint="see docs/eval.md")
    model = OpenAICompatibleModel(settings.openai_model, settings.openai_base_urls,
                                  api_key=os.environ.get("OPENAI_API_KEY"),
                                  max_tokens=config.reply_tokens,
                                  temperature=config.temperature)

    def reseed(seed: int) -> None:
        model.params["seed"] = seed
    return EvalModel(model, reseed, seeded=True)


def _anthropic(settings: Settings, config: ModelConfig) -> EvalModel:
    from threadline.models.anthropic_messages import AnthropicModel

    api_key = os.environ.get("ANTHROPIC_API_KEY")
    if not settings.anthropic_model or not (api_key or settings.anthropic_base_url):
        raise InputError("the anthropic backend needs THREADLINE_ANTHROPIC_MODEL, and "
                         "ANTHROPIC_API_KEY or THREADLINE_ANTHROPIC_BASE_URL",
                         hint="see docs/eval.md")
    return EvalModel(AnthropicModel(settings.anthropic_model,
                                    base_url=settings.anthropic_base_url, api_key=api_key,
                                    max_tokens=config.reply_tokens,
                                    temperature=config.temperature))


def _scripted(settings: Settings, config: ModelConfig) -> EvalModel:
    return EvalModel(ScriptedModel())


BACKENDS: dict[str, Callable[[Settings, ModelConfig], EvalModel]] = {
    "anthropic": _anthropic, "local": _local, "openai": _openai, "scripted": _scripted,
}


def build(settings: Settings, config: ModelConfig) -> EvalModel:
    return BACKENDS[config.backend](settings, config)
