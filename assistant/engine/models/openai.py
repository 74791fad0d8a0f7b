"""OpenAI chat completions through the official ``openai`` SDK: OpenAI itself or any compatible server.

The request maps the engine's messages, tools and ``tool_choice`` to the wire format, asks for the
usage in the last chunk (``stream_options.include_usage``), and sends ``reasoning_effort`` only to a
model that reasons. The request goes through the client's ``post`` with the body built here, and
the chunks are read as plain JSON, not as the SDK's models. The stream yields text deltas as they
arrive; tool calls are accumulated by index across chunks and yielded whole at the end, then the
usage (cached prompt and reasoning tokens included) and the finish reason. SDK errors become engine errors in ``translated``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import httpx2
import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)

from ..errors import (
    AuthenticationFailed,
    MalformedResponse,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
)
from ..providers.openai import OpenAIProvider
from ..types import (
    FinishPart,
    Message,
    ModelRequest,
    NamedTool,
    ResponseModel,
    Sampling,
    StreamPart,
    TextDelta,
    ToolCallPart,
    ToolSpec,
    UsagePart,
)
from .streaming import ServedModel, ToolCallBuffer, finish_reason, prompt_cache_key, status_error

REASONING_REFUSES = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
"""What OpenAI's reasoning models refuse of the sampling parameters."""


class OpenAIModel(ServedModel[OpenAIProvider]):
    """One model served by an ``OpenAIProvider``'s Chat Completions; ``api_model`` is its name on the server."""

    def dropped(self, sampling: Sampling) -> tuple[str, ...]:
        """A reasoning model refuses the sampling parameters (OpenAI's reasoning models answer 400): not sent."""
        if not self.info.reasons:
            return ()
        return tuple(name for name in REASONING_REFUSES if name in sampling.given())

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        calls = ToolCallBuffer()
        usage: UsagePart | None = None
        reason: str | None = None
        answered = ""
        try:
            with translated():
                stream = await self._create(request)
                async with stream:
                    async for raw in stream:
                        chunk = _dict(raw)
                        answered = _str(chunk.get("model")) or answered
                        raw_usage = chunk.get("usage")
                        if raw_usage:
                            usage = _usage(raw_usage)
                        for choice in _list(chunk.get("choices"))[:1]:
                            delta = _dict(choice.get("delta"))
                            text = delta.get("content") or delta.get("refusal")
                            if text:
                                yield TextDelta(_str(text))
                            for piece in _list(delta.get("tool_calls")):
                                fn = _dict(piece.get("function"))
                                calls.add(
                                    _int(piece.get("index")),
                                    _str(piece.get("id")) or None,
                                    _str(fn.get("name")) or None,
                                    _str(fn.get("arguments")) or None,
                                )
                            if choice.get("finish_reason") is not None:
                                reason = _str(choice["finish_reason"])
        except ModelError:
            if usage is not None:  # the provider reported the call's usage before it broke off: that is billed
                yield usage
            raise
        if reason is None:
            raise MalformedResponse("the stream ended before the model finished its answer")
        if answered:
            yield ResponseModel(answered)
        complete = calls.calls()
        for call in complete:
            yield ToolCallPart(call)
        if usage is not None:
            yield usage
        yield FinishPart(finish_reason(reason, bool(complete)))

    async def _create(self, request: ModelRequest) -> openai.AsyncStream[object]:
        """The streamed request, sent with the client's ``post`` (the SDK's way to a request of one's own): the body
        is sent as built here, the chunks come as plain JSON. The typed ``chat.completions.create`` walked every
        message and tool schema to transform them, and built pydantic models for every chunk: more CPU than the
        rest of the call. Errors, retries of the client, timeouts and SSE decoding are the SDK's as before."""
        official = self.provider.is_openai
        effort = self.info.effort_for(request.reasoning_effort)
        cap = request.max_output_tokens
        body: dict[str, object] = {
            "model": self.api_model,
            "messages": [_message(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
            body["tool_choice"] = _tool_choice(request)
            body["parallel_tool_calls"] = request.parallel_tool_calls
        if cap is not None:
            # OpenAI's reasoning models refuse max_tokens; older compatible servers only know it.
            body["max_completion_tokens" if official else "max_tokens"] = cap
        if effort is not None:
            body["reasoning_effort"] = effort
        if request.sampling is not None:
            dropped = self.dropped(request.sampling)
            body.update((k, v) for k, v in request.sampling.given().items() if k not in dropped)
        if official:
            body["prompt_cache_key"] = prompt_cache_key(request.messages)
        return await self.provider.client.post(
            "/chat/completions",
            cast_to=object,
            body=body,
            options={"security": {"bearer_auth": True}},
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )


def _malformed(what: str, value: object) -> NoReturn:
    raise MalformedResponse(f"the OpenAI stream sent {what} where the protocol has none: {value!r:.200}")


def _dict(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        _malformed("a non-object", value)
    return value


def _list(value: object) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        _malformed("a non-list of objects", value)
    return value


def _str(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        _malformed("a non-string", value)
    return value


def _int(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        _malformed("a non-integer", value)
    return value


def _message(m: Message) -> ChatCompletionMessageParam:
    if m.role == "system":
        return ChatCompletionSystemMessageParam(role="system", content=m.content)
    if m.role == "user":
        return ChatCompletionUserMessageParam(role="user", content=m.content)
    if m.role == "tool":
        return ChatCompletionToolMessageParam(role="tool", content=m.content, tool_call_id=m.tool_call_id or "")
    message = ChatCompletionAssistantMessageParam(role="assistant", content=m.content or None)
    if m.tool_calls:
        message["tool_calls"] = [
            ChatCompletionMessageFunctionToolCallParam(
                id=c.id, type="function", function={"name": c.name, "arguments": c.arguments}
            )
            for c in m.tool_calls
        ]
    return message


def _tool(spec: ToolSpec) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
    }


def _tool_choice(request: ModelRequest) -> ChatCompletionToolChoiceOptionParam:
    choice = request.tool_choice
    if isinstance(choice, NamedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _usage(u: object) -> UsagePart:
    usage = _dict(u)
    prompt = _dict(usage.get("prompt_tokens_details"))
    completion = _dict(usage.get("completion_tokens_details"))
    return UsagePart(
        prompt_tokens=_int(usage.get("prompt_tokens")) or 0,
        completion_tokens=_int(usage.get("completion_tokens")) or 0,
        cached_prompt_tokens=_int(prompt.get("cached_tokens")) or 0,
        reasoning_tokens=_int(completion.get("reasoning_tokens")) or 0,
    )


@contextmanager
def translated() -> Iterator[None]:
    """The one place where the SDK's errors become the engine's."""
    try:
        yield
    except openai.APIStatusError as e:
        _raise_for_status(e)
    except openai.APITimeoutError as e:
        raise ModelTimeout("OpenAI did not answer in time") from e
    except openai.APIConnectionError as e:
        raise ModelUnavailable(
            f"the connection to the OpenAI server failed or broke off ({e.__cause__ or e})",
            unsent=isinstance(e.__cause__, httpx2.ConnectError),  # never reached the server: nothing to bill
        ) from e
    except openai.APIResponseValidationError as e:
        raise MalformedResponse(f"the OpenAI server sent a response that cannot be read ({e})") from e
    except openai.APIError as e:  # an error event in the middle of the stream
        raise ModelUnavailable(f"the OpenAI server reported an error while answering: {e.message}") from e
    except (json.JSONDecodeError, httpx2.StreamError, httpx2.DecodingError) as e:
        raise MalformedResponse(f"the OpenAI stream could not be read ({e})") from e
    except httpx2.HTTPError as e:
        raise ModelUnavailable(
            f"the connection to the OpenAI server failed or broke off ({e})", unsent=isinstance(e, httpx2.ConnectError)
        ) from e


def _raise_for_status(e: openai.APIStatusError) -> NoReturn:
    detail = _detail(e)
    if isinstance(e, openai.RateLimitError) and e.code == "insufficient_quota":
        raise AuthenticationFailed(
            f"the OpenAI account behind this key has no credit left: {detail}", status=e.status_code
        ) from e
    raise status_error("OpenAI", e.status_code, detail, e.response.headers, "OPENAI_API_KEY") from e


def _detail(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return e.message
