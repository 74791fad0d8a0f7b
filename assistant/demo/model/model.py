"""The demo model: it runs the procedure for each call and streams its text word by word, with usage."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import assistant.demo.model.procedure as procedure
from assistant.engine.catalogue import ModelInfo
from assistant.engine.delegation import AGENTS_TOOL
from assistant.engine.errors import ModelUnavailable
from assistant.engine.models.base import Model
from assistant.engine.tokens import estimate_tokens, prompt_tokens, request_tokens
from assistant.engine.types import (
    FinishPart,
    ModelRequest,
    ModelResponse,
    Reasoning,
    ReasoningPart,
    StreamPart,
    TextDelta,
    ToolCallPart,
    UsagePart,
)

from .language import interface_language
from .markers import DEMO_FAIL, DEMO_HANG
from .texts import Language, say


class DemoModel(Model):
    """The demo model; ``pace`` is the delay between streamed words, ``latency`` before the first part."""

    def __init__(self, info: ModelInfo, *, pace: float = 0.0, latency: float = 0.0) -> None:
        super().__init__(info)
        self.pace = pace
        self.latency = latency
        self._calls = 0

    def language(self, request: ModelRequest) -> Language:
        """The language this call writes in: its question's (an agent's: its instruction's), else the interface's."""
        return procedure.language_for(request, interface_language(request.language))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        self._calls += 1
        if procedure.is_agent(request) and DEMO_FAIL in request.messages[1].content:
            if self.latency:
                await asyncio.sleep(self.latency)
            raise ModelUnavailable(say("failure", self.language(request)), unsent=True)
        hang = DEMO_HANG.search(request.messages[1].content) if procedure.is_agent(request) else None
        if hang and any(m.role == "assistant" for m in request.messages):  # after the agent's first round
            await asyncio.sleep(float(hang.group(1)))
        response = self.respond(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        thought = self.reasoning(request, response)
        if thought is not None:
            yield ReasoningPart(thought)
        if response.text:
            pieces = re.findall(r"\S+\s*|\s+", response.text)
            for piece in pieces:
                if self.pace:
                    await asyncio.sleep(self.pace)
                yield TextDelta(piece)
        for call in response.tool_calls:
            yield ToolCallPart(call)
        prompt = prompt_tokens(request)
        # Providers cache the prefix a request shares with the previous one, in blocks.
        cached = (request_tokens(request.messages[:-1]) // 128) * 128 if len(request.messages) > 2 else 0
        completion = estimate_tokens(response.text) + sum(estimate_tokens(c.arguments) for c in response.tool_calls)
        yield UsagePart(prompt_tokens=prompt, completion_tokens=completion, cached_prompt_tokens=min(cached, prompt))
        yield FinishPart("tool_calls" if response.tool_calls else "stop")

    def reasoning(self, request: ModelRequest, response: ModelResponse) -> Reasoning | None:
        """A reasoning model's summary of this round, as a provider gives one (the main model's only: an agent's
        rounds say nothing of it): why it delegates, searches, or answers."""
        if not self.info.reasons or request.reasoning_effort is None or procedure.is_agent(request):
            return None
        names = {c.name for c in response.tool_calls}
        code = "thinking_agents" if AGENTS_TOOL in names else "thinking_tools" if names else "thinking_answer"
        return Reasoning(format="demo", model=self.info.id, summary=(say(code, self.language(request)),))

    def respond(self, request: ModelRequest) -> ModelResponse:
        """The procedure's response to one request (no streaming, no pace)."""
        calls = self._calls
        step = procedure.Step(request, self.language(request), lambda n: f"call_{calls}_{n}")
        return procedure.respond(step)
