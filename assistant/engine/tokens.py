"""Token estimation: a provider-neutral estimate of a text's, a history's and a request's size.

Budgets reserve against it before a call, compaction and the main loop fit histories with it, and
the fake and demo models report it as their usage. About four characters a token.
"""

from __future__ import annotations

import json

from .types import Message, ModelRequest


def estimate_tokens(text: str) -> int:
    """A provider-neutral estimate: about four characters a token."""
    return len(text) // 4 + 1


def request_tokens(messages: tuple[Message, ...]) -> int:
    """The estimated prompt size of a history: each message's text, its tool calls' arguments, and 4 per message."""
    return sum(
        estimate_tokens(m.content) + sum(estimate_tokens(c.arguments) for c in m.tool_calls) + 4 for m in messages
    )


def prompt_tokens(request: ModelRequest) -> int:
    """The estimated prompt size of a request: its messages and its tool specs."""
    return request_tokens(request.messages) + sum(
        estimate_tokens(json.dumps(t.parameters)) + estimate_tokens(t.description) for t in request.tools
    )


__all__ = ["estimate_tokens", "prompt_tokens", "request_tokens"]
