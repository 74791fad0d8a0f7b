"""A model driven by a Python function: the scripted fake for tests and benchmarks.

It implements the same interface as the real providers, records every request it receives, and
streams what the function returns (its reasoning, text in word pieces, tool calls, usage, finish).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from ..catalogue import ModelInfo
from ..tokens import estimate_tokens, request_tokens
from ..types import (
    FinishPart,
    ModelRequest,
    ModelResponse,
    ReasoningPart,
    StreamPart,
    TextDelta,
    ToolCallPart,
    UsagePart,
)
from .base import Model


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What the function is told besides the request: which call of this model it is (from 0)."""

    index: int


ModelFunction = Callable[[ModelRequest, CallInfo], ModelResponse | Awaitable[ModelResponse]]


class FunctionModel(Model):
    """Streams whatever ``function(request, info)`` returns, after ``latency`` seconds."""

    def __init__(
        self,
        function: ModelFunction,
        info: ModelInfo,
        *,
        latency: float = 0.0,
        chunk_words: int = 1,
    ) -> None:
        super().__init__(info)
        self.function = function
        self.latency = latency
        self.chunk_words = chunk_words
        self.requests: list[ModelRequest] = []
        self.intervals: list[tuple[float, float]] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.requests.append(request)
        result = self.function(request, CallInfo(len(self.requests) - 1))
        response = await result if inspect.isawaitable(result) else result
        if self.latency:
            await asyncio.sleep(self.latency)
        for reasoning in response.reasoning:
            yield ReasoningPart(reasoning)
        words = response.text.split(" ") if response.text else []
        for i in range(0, len(words), self.chunk_words):
            piece = " ".join(words[i : i + self.chunk_words])
            yield TextDelta(piece if i == 0 else " " + piece)
        for call in response.tool_calls:
            yield ToolCallPart(call)
        yield response.usage or UsagePart(
            prompt_tokens=request_tokens(request.messages),
            completion_tokens=estimate_tokens(response.text)
            + sum(estimate_tokens(c.arguments) for c in response.tool_calls),
        )
        self.intervals.append((started, loop.time()))
        yield FinishPart(
            response.finish_reason if response.finish_reason != "stop" or not response.tool_calls else "tool_calls"
        )
