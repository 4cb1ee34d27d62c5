"""The Anthropic backend's payload: breakpoints (at most four, none below the model's minimum,
the TTL the setting names), tool use in its own blocks, the SDK's types, and its settings.
Unit tests on the payload alone: nothing is sent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.render.sdk_shapes import problems
from tests.render.test_renderers import LONG, _cache_controls, _request
from threadline.cache.pricing import profile
from threadline.errors import InputError
from threadline.models import create_model
from threadline.models.anthropic_messages import AnthropicModel, minimum_prefix, pricing_profile
from threadline.render.anthropic import MAX_BREAKPOINTS, render_anthropic
from threadline.request import Message, Request, Segment, SegmentKind, Stability
from threadline.settings import Settings

anthropic_params = pytest.importorskip("anthropic.types.message_create_params")
STREAMING = anthropic_params.MessageCreateParamsStreaming


def _model(name: str = "claude-sonnet-4-6", **options: object) -> AnthropicModel:
    return AnthropicModel(name, base_url="http://127.0.0.1:9", **options)  # type: ignore[arg-type]


def test_the_payload_streams_matches_the_sdk_types_and_carries_the_ttl() -> None:
    for ttl in ("5m", "1h"):
        payload = _model(ttl=ttl, max_tokens=64).payload(_request())
        assert problems(payload, STREAMING) == []
        assert payload["stream"] is True and payload["max_tokens"] == 64
        marked = _cache_controls(payload)
        assert marked == ["tools[1]", "system[0]", "system[1]", "messages[3].content[0]"]
        controls = [b["cache_control"] for b in payload["system"] if "cache_control" in b]
        assert controls == [{"type": "ephemeral", "ttl": ttl}] * 2
    assert pricing_profile("5m") == "anthropic-5m" and pricing_profile("1h") == "anthropic-1h"


def test_the_minimum_comes_from_the_profile_per_model() -> None:
    # ~1,900 estimated tokens of system prompt: enough for Sonnet (1,024), not for Opus 4.6
    # or Haiku 4.5 (4,096 each)
    request = _request(tools=[], static=[])
    assert _model("claude-sonnet-4-6").min_cacheable_tokens == 1024
    assert _cache_controls(_model("claude-sonnet-4-6").payload(request)) == [
        "system[0]", "messages[3].content[0]"]
    for name in ("claude-opus-4-6", "claude-haiku-4-5"):
        backend = _model(name)
        assert backend.min_cacheable_tokens == 4096
        assert _cache_controls(backend.payload(request)) == []
    assert _model("smollm2").min_cacheable_tokens == 1024  # not a Claude model: the default
    assert _cache_controls(_model("claude-opus-4-6", min_cacheable_tokens=0).payload(
        _request(system="Short.", static=[], tools=[]))) == ["system[0]",
                                                            "messages[3].content[0]"]


def test_the_minimums_are_the_pricing_profiles() -> None:
    for ttl in ("5m", "1h"):
        pricing = profile(pricing_profile(ttl))
        for name in [*pricing.min_prefix_by_model, "claude-opus-4-6-20270101", "smollm2"]:
            assert minimum_prefix(name, ttl) == pricing.min_prefix(name), name


def test_past_four_breakpoints_the_last_one_is_kept() -> None:
    system = [Message("system", f"Part {n}. " + LONG) for n in range(6)]
    history = (Message("user", "hello", seq=1), Message("assistant", "hi", seq=2))
    request = Request(tools=(), segments=tuple(
        Segment(SegmentKind.SYSTEM, Stability.DEPLOY, (m,), cache_point=True) for m in system
    ) + (Segment(SegmentKind.HISTORY, Stability.CONVERSATION, history, cache_point=True),
         Segment(SegmentKind.CURRENT, Stability.TURN, (Message("user", "next"),))))
    payload = render_anthropic(request, model="m", max_tokens=10)
    marked = _cache_controls(payload)
    assert len(marked) == MAX_BREAKPOINTS
    assert marked == ["system[0]", "system[1]", "system[2]", "messages[1].content[0]"]


def test_tool_calls_and_results_travel_as_tool_use_and_tool_result_blocks() -> None:
    payload = _model().payload(_request())
    call_turn, result_turn = payload["messages"][1], payload["messages"][2]
    assert call_turn["role"] == "assistant"
    assert [b["type"] for b in call_turn["content"]] == ["tool_use", "tool_use"]
    assert call_turn["content"][0] == {"type": "tool_use", "id": "t1", "name": "search",
                                       "input": {"to": "LIS"}}
    assert result_turn["role"] == "user"
    assert [(b["type"], b["tool_use_id"]) for b in result_turn["content"]] == [
        ("tool_result", "t1"), ("tool_result", "t2")]


def test_settings_and_bad_configuration_are_refused_clearly(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    env = {"THREADLINE_HOME": str(tmp_path), "THREADLINE_ANTHROPIC_MODEL": "claude-sonnet-4-6",
           "THREADLINE_ANTHROPIC_BASE_URL": "http://127.0.0.1:9/",
           "THREADLINE_ANTHROPIC_CACHE_TTL": "1H", "THREADLINE_ANTHROPIC_MAX_TOKENS": "77"}
    settings = Settings.from_env(env)
    assert (settings.anthropic_model, settings.anthropic_cache_ttl,
            settings.anthropic_max_tokens) == ("claude-sonnet-4-6", "1h", 77)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    backend = create_model("anthropic", settings)
    assert isinstance(backend, AnthropicModel)
    assert (backend.model_id, backend.base_url, backend.ttl, backend.max_tokens) == (
        "anthropic:claude-sonnet-4-6", "http://127.0.0.1:9", "1h", 77)
    with pytest.raises(InputError, match="must be 5m or 1h"):
        Settings.from_env({**env, "THREADLINE_ANTHROPIC_CACHE_TTL": "10m"})
    for missing in ("THREADLINE_ANTHROPIC_MODEL", "THREADLINE_ANTHROPIC_BASE_URL"):
        partial = Settings.from_env({k: v for k, v in env.items() if k != missing})
        with pytest.raises(InputError, match="THREADLINE_ANTHROPIC_MODEL, and ANTHROPIC_API_KEY"):
            create_model("anthropic", partial)
    # Anthropic's own API needs no base URL, only a key
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    hosted = create_model("anthropic", Settings.from_env(
        {k: v for k, v in env.items() if k != "THREADLINE_ANTHROPIC_BASE_URL"}))
    assert isinstance(hosted, AnthropicModel) and hosted.base_url is None


def test_the_cli_refuses_a_missing_model_name_and_writes_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THREADLINE_", "ANTHROPIC_"))}
    env.update(THREADLINE_HOME=str(tmp_path), THREADLINE_MODEL="anthropic",
               THREADLINE_ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    run = subprocess.run([sys.executable, "-m", "threadline", "chat", "--once", "hello"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "THREADLINE_ANTHROPIC_MODEL" in run.stderr and "nothing was sent" in run.stderr
    assert not (tmp_path / "threadline.db").exists()


def test_a_bad_ttl_in_the_constructor_is_refused() -> None:
    with pytest.raises(InputError, match="5m or 1h"):
        _model(ttl="24h")
    with pytest.raises(InputError, match="model name"):
        AnthropicModel("", base_url="http://127.0.0.1:9")
