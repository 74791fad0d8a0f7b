"""Token estimation: a provider-neutral estimate of a text's, a history's and a request's size.

Budgets reserve against it before a call, compaction and the main loop fit histories with it, and
the fake and demo models report it as their usage. About four characters a token.
"""

from __future__ import annotations

import json

from .types import Message, ModelRequest, Reasoning, ToolSpec

# A tool spec's size, by the spec (kept alive here, so that its id is not reused while cached): a run sends the same
# specs with every call, and writing their schemas out as JSON each time cost more than the rest of the estimate.
_SPEC_TOKENS: dict[int, tuple[ToolSpec, int]] = {}
_SPEC_CACHE_SIZE = 4096


def estimate_tokens(text: str) -> int:
    """A provider-neutral estimate: about four characters a token."""
    return len(text) // 4 + 1


def request_tokens(messages: tuple[Message, ...]) -> int:
    """The estimated prompt size of a history: each message's text, its tool calls' arguments, the reasoning it sends
    back (``reasoning_tokens``), and 4 per message."""
    return sum(
        estimate_tokens(m.content)
        + sum(estimate_tokens(c.arguments) for c in m.tool_calls)
        + (reasoning_tokens(m.reasoning) if m.reasoning else 0)
        + 4
        for m in messages
    )


def reasoning_tokens(reasoning: tuple[Reasoning, ...]) -> int:
    """What a turn's reasoning weighs when it goes back: its summary, and its encrypted content (or signature), which
    stands for the reasoning itself (an over-estimate rather than a window overrun)."""
    return sum(estimate_tokens(r.text) + estimate_tokens(r.encrypted or r.signature) for r in reasoning)


def prompt_tokens(request: ModelRequest) -> int:
    """The estimated prompt size of a request: its messages and its tool specs."""
    return request_tokens(request.messages) + sum(spec_tokens(t) for t in request.tools)


def spec_tokens(spec: ToolSpec) -> int:
    """The estimated size of one tool spec: its JSON schema and its description."""
    cached = _SPEC_TOKENS.get(id(spec))
    if cached is not None and cached[0] is spec:
        return cached[1]
    size = estimate_tokens(json.dumps(spec.parameters)) + estimate_tokens(spec.description)
    if len(_SPEC_TOKENS) >= _SPEC_CACHE_SIZE:
        _SPEC_TOKENS.clear()
    _SPEC_TOKENS[id(spec)] = (spec, size)
    return size


__all__ = ["estimate_tokens", "prompt_tokens", "reasoning_tokens", "request_tokens", "spec_tokens"]
