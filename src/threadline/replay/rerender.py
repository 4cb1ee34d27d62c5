"""What a backend would send today for a re-assembled request, without calling it.

A call record holds the request as its backend sent it: the messages in the provider's shape,
the payload's other fields (``params``), and for backends that render a chat template
themselves the prompt and its token ids. Replaying a call re-assembles the provider-neutral
request and renders it again the way the recorded backend did, taking from the record only
what is the backend's setting, not assembly (its model name, sampling, ``max_tokens``,
``stream``). Which backend a record came from is the prefix of its model id.

    scripted             ChatML per message and the generation prompt, with token ids: bytes
    openai-compatible:   render/openai.py's payload, with the recorded params: bytes
    llama.cpp:           the messages only: the prompt needs the GGUF's chat template, which
                         a replay without ``--model`` does not load
    a failed call        that recorded what it meant to send (no payload was built): the
                         messages only, as it recorded them

Anthropic's records are not re-rendered (their messages are merged into turns and their
breakpoints depend on settings the record does not hold); replay says so and skips them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from threadline.calls import ModelCall, SentRequest
from threadline.models.scripted import scripted_rendering
from threadline.render.openai import render_openai
from threadline.request import Request

# what the assembler decides in an OpenAI payload; the rest of its params are the backend's
_ASSEMBLED = ("model", "messages", "tools", "tool_choice", "prompt_cache_key")


@dataclass(frozen=True)
class Rerendered:
    sent: SentRequest
    compared: str  # "bytes": as the backend sends them; "messages": the messages only


Rerender = Callable[[Request, SentRequest], Rerendered]


def _scripted(request: Request, recorded: SentRequest) -> Rerendered:
    return Rerendered(SentRequest(model=recorded.model, messages=request.openai_tuple(),
                                  rendering=scripted_rendering(request.messages)), "bytes")


def _openai(request: Request, recorded: SentRequest) -> Rerendered:
    params = dict(recorded.params)
    name = params.get("model")
    if not isinstance(name, str):
        name = recorded.model.partition(":")[2]
    choice = params.get("tool_choice")
    # the tool loop's last call is told to answer in text: the loop decides that, not assembly
    request = replace(request, tool_choice=choice if isinstance(choice, str) else "auto")
    payload = render_openai(request, model=name, cache_key=request.cache_key,
                            **{k: v for k, v in params.items() if k not in _ASSEMBLED})
    return Rerendered(SentRequest(model=recorded.model, messages=tuple(payload["messages"]),
                                  params={k: v for k, v in payload.items() if k != "messages"}),
                      "bytes")


def _messages_only(request: Request, recorded: SentRequest) -> Rerendered:
    return Rerendered(SentRequest(model=recorded.model, messages=request.openai_tuple(),
                                  params=recorded.params), "messages")


RERENDERERS: dict[str, Rerender] = {
    "scripted": _scripted,
    "openai-compatible:": _openai,
    "llama.cpp:": _messages_only,
}


def rerenderer(call: ModelCall) -> Rerender | None:
    """How to render a request again as ``call``'s backend did (None: replay cannot)."""
    recorded = call.request
    assert recorded is not None
    if call.messages_only:
        return _messages_only  # failed before building a payload: it recorded its messages
    for prefix, rerender in RERENDERERS.items():
        if recorded.model == prefix or (prefix.endswith(":")
                                        and recorded.model.startswith(prefix)):
            return rerender
    return None
