"""OpenAI chat completions through the official ``openai`` SDK: OpenAI itself or any compatible server.

The request maps the engine's messages, tools and ``tool_choice`` to the wire format, asks for the
usage in the last chunk (``stream_options.include_usage``), and sends ``reasoning_effort`` only to a
model that reasons. The response is read raw (the SDK's ``with_streaming_response``) and its chunks
parsed as plain JSON, not as the SDK's models. The stream yields text deltas as they arrive; tool
calls are accumulated by index across chunks and yielded whole at the end, then the usage (cached prompt and reasoning
tokens included) and the finish reason. SDK errors become engine errors in ``_translated``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager as AsyncContextManager
from contextlib import contextmanager
from typing import Any, NoReturn

import httpx2
import openai
from openai import AsyncAPIResponse, omit
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

from ..catalogue import ModelInfo
from ..errors import (
    AuthenticationFailed,
    BadModelRequest,
    MalformedResponse,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
)
from ..providers.openai import OpenAIProvider
from ..types import (
    FinishPart,
    Message,
    ModelRequest,
    NamedTool,
    StreamPart,
    TextDelta,
    ToolCallPart,
    ToolSpec,
    UsagePart,
)
from .base import Model
from .streaming import RetryPolicy, ToolCallBuffer, finish_reason, prompt_cache_key, retry_after, retrying


class OpenAIModel(Model):
    """One model served by an ``OpenAIProvider``; ``api_model`` is its name on the server."""

    def __init__(
        self,
        info: ModelInfo,
        provider: OpenAIProvider,
        *,
        api_model: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(info)
        self.provider = provider
        self.api_model = api_model or info.id
        self.retry = retry or RetryPolicy()

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        return retrying(lambda: self._attempt(request), self.retry)

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        calls = ToolCallBuffer()
        usage: UsagePart | None = None
        reason: str | None = None
        try:
            with _translated():
                async with self._create(request) as response:
                    async for chunk in _chunks(response):
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
        complete = calls.calls()
        for call in complete:
            yield ToolCallPart(call)
        if usage is not None:
            yield usage
        yield FinishPart(finish_reason(reason, bool(complete)))

    def _create(self, request: ModelRequest) -> AsyncContextManager[AsyncAPIResponse[Any]]:
        """The streamed request, its response read raw: the chunks are plain JSON (``_chunks``), not SDK models."""
        official = self.provider.is_openai
        effort = self.info.effort_for(request.reasoning_effort)
        cap = request.max_output_tokens
        tools = [_tool(t) for t in request.tools]
        return self.provider.client.chat.completions.with_streaming_response.create(
            model=self.api_model,
            messages=[_message(m) for m in request.messages],
            stream=True,
            stream_options={"include_usage": True},
            tools=tools or omit,
            tool_choice=_tool_choice(request) if tools else omit,
            parallel_tool_calls=request.parallel_tool_calls if tools else omit,
            # OpenAI's reasoning models refuse max_tokens; older compatible servers only know it.
            max_completion_tokens=cap if cap is not None and official else omit,
            max_tokens=cap if cap is not None and not official else omit,
            reasoning_effort=effort if effort is not None else omit,
            prompt_cache_key=prompt_cache_key(request.messages) if official else omit,
        )


async def _chunks(response: AsyncAPIResponse[Any]) -> AsyncIterator[dict[str, Any]]:
    """The stream's chunks as plain JSON objects, read from its server-sent events until ``[DONE]``.

    Building the SDK's pydantic models for every chunk cost more than the rest of the call; this reads what
    ``_attempt`` needs and nothing else. An ``error`` object in the stream is the server failing mid-answer.
    """
    data: list[str] = []
    lines = response.iter_lines()
    async for line in lines:
        if line:
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            continue  # event:, id:, retry: and comments carry nothing the chat completions stream needs
        if not data:
            continue
        payload, data = "\n".join(data), []
        if payload.startswith("[DONE]"):
            async for _rest in lines:  # read to the end, so that the connection is kept for the next call
                pass
            return
        yield _chunk(payload)
    if data:  # the last event, without the blank line that should end it
        payload = "\n".join(data)
        if not payload.startswith("[DONE]"):
            yield _chunk(payload)


def _chunk(payload: str) -> dict[str, Any]:
    chunk = json.loads(payload)
    if not isinstance(chunk, dict):
        raise MalformedResponse(f"the OpenAI stream sent a chunk that is not an object: {payload[:200]}")
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise ModelUnavailable(f"the OpenAI server reported an error while answering: {message}")
    return chunk


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
def _translated() -> Iterator[None]:
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
    except httpx2.TimeoutException as e:  # the raw stream's read timeout (the SDK's own calls raise APITimeoutError)
        raise ModelTimeout("OpenAI did not answer in time") from e
    except httpx2.HTTPError as e:
        raise ModelUnavailable(
            f"the connection to the OpenAI server failed or broke off ({e})", unsent=isinstance(e, httpx2.ConnectError)
        ) from e


def _raise_for_status(e: openai.APIStatusError) -> NoReturn:
    detail = _detail(e)
    if isinstance(e, openai.RateLimitError):
        if e.code == "insufficient_quota":
            raise AuthenticationFailed(
                f"the OpenAI account behind this key has no credit left: {detail}", status=e.status_code
            ) from e
        raise RateLimited(f"OpenAI is rate limiting this key: {detail}", retry_after(e.response.headers)) from e
    if isinstance(e, openai.AuthenticationError | openai.PermissionDeniedError):
        raise AuthenticationFailed(
            f"OpenAI refused the API key (HTTP {e.status_code}): {detail}. Check OPENAI_API_KEY.", status=e.status_code
        ) from e
    if e.status_code >= 500:
        raise ModelUnavailable(
            f"the OpenAI server failed (HTTP {e.status_code}): {detail}", status=e.status_code
        ) from e
    raise BadModelRequest(f"OpenAI rejected the request (HTTP {e.status_code}): {detail}", status=e.status_code) from e


def _detail(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return e.message
