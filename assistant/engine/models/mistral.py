"""Mistral chat completions through the official ``mistralai`` SDK (``chat.stream_async``).

Same shape as the OpenAI adapter: text deltas as they arrive, tool calls accumulated by index and
yielded whole, then the usage and the finish reason. A reasoning model's (Magistral's) ``thinking``
chunks are gathered into the turn's ``Reasoning`` (its text, and its ``signature`` wherever in the
stream it came), yielded when the text starts and again at the end if its signature came later; the
next requests of the same loop send it back in place, as a ``thinking`` chunk of the assistant
message before its text. ``reasoning_effort`` is sent only to a model whose reasoning is adjustable (Magistral
models always reason and take no such parameter). SDK errors become engine errors in
``_translated``.

Mistral's API is stricter than OpenAI's about what it is sent (``mistral_messages``): a tool-call id must be 9
letters or digits (an id Mistral did not generate — ours, an API client's, the demo's — is mapped to one, the same
in every request of a conversation), a user message may not follow a tool message (it would be refused with
``invalid_request_message_order``: it goes into that tool result's content), an assistant message needs text or
tool calls, and a field it does not know is refused (422 ``extra_forbidden``): only its own fields are sent.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import string
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

import httpx2
from mistralai.client import errors, models
from mistralai.client.types import UNSET

from ..catalogue import ModelInfo
from ..errors import (
    MalformedResponse,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
)
from ..providers.mistral import MistralProvider
from ..types import (
    FinishPart,
    Message,
    ModelRequest,
    NamedTool,
    Reasoning,
    ReasoningPart,
    ResponseModel,
    Sampling,
    StreamPart,
    TextDelta,
    ToolCallPart,
    ToolSpec,
    UsagePart,
)
from .streaming import RetryPolicy, ServedModel, ToolCallBuffer, finish_reason, prompt_cache_key, status_error

log = logging.getLogger(__name__)


class MistralModel(ServedModel[MistralProvider]):
    """One model served by a ``MistralProvider``; ``api_model`` is its name on the server.

    ``adjustable_reasoning`` says the model takes ``reasoning_effort`` (mistral-small); a model that
    reasons natively (Magistral) lists efforts in the catalogue but is sent none.
    """

    def __init__(
        self,
        info: ModelInfo,
        provider: MistralProvider,
        *,
        api_model: str | None = None,
        adjustable_reasoning: bool = True,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(info, provider, api_model=api_model, retry=retry)
        self.adjustable_reasoning = adjustable_reasoning

    def dropped(self, sampling: Sampling) -> tuple[str, ...]:
        """Mistral refuses fields it does not know: ``user`` has no equivalent there (``seed`` is its
        ``random_seed``)."""
        return ("user",) if sampling.user is not None else ()

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        calls = ToolCallBuffer()
        usage: UsagePart | None = None
        reason: str | None = None
        answered = ""
        thinking = _Thinking(self.api_model)
        effort = self.info.effort_for(request.reasoning_effort) if self.adjustable_reasoning else None
        tools = [_tool(t) for t in request.tools]
        try:
            with _translated():
                stream = await self.provider.client.chat.stream_async(
                    model=self.api_model,
                    messages=mistral_messages(request.messages, self.api_model),
                    tools=tools or UNSET,
                    tool_choice=_tool_choice(request) if tools else None,
                    parallel_tool_calls=request.parallel_tool_calls if tools else None,
                    max_tokens=request.max_output_tokens if request.max_output_tokens is not None else UNSET,
                    reasoning_effort=effort if effort is not None else UNSET,
                    prompt_cache_key=prompt_cache_key(request.messages),
                    **_sampling(request.sampling),
                )
                async with stream:
                    async for event in stream:
                        chunk = event.data
                        answered = chunk.model or answered
                        if chunk.usage is not None:
                            usage = _usage(chunk.usage)
                        for choice in chunk.choices[:1]:
                            delta = choice.delta
                            thinking.add(delta.content)
                            text = _text(delta.content)
                            if text:
                                said = thinking.said()
                                if said is not None:
                                    yield said
                                yield TextDelta(text)
                            for piece in delta.tool_calls or ():
                                calls.add(piece.index, piece.id, piece.function.name, piece.function.arguments)
                            if choice.finish_reason is not None:
                                reason = choice.finish_reason
        except ModelError:
            if usage is not None:  # the provider reported the call's usage before it broke off: that is billed
                yield usage
            raise
        if reason is None:
            raise MalformedResponse("the stream ended before the model finished its answer")
        if reason == "error":
            raise ModelUnavailable("the Mistral server reported an error while the model was answering")
        if answered:
            yield ResponseModel(answered)
        said = thinking.said()
        if said is not None:
            yield said
        complete = calls.calls()
        for call in complete:
            yield ToolCallPart(call)
        if usage is not None:
            yield usage
        yield FinishPart(finish_reason(reason, bool(complete)))


class _Thinking:
    """A turn's thinking chunks as they stream: their text, and their signature wherever it came."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.parts: list[str] = []
        self.signature = ""
        self._said: Reasoning | None = None

    def add(self, content: Any) -> None:
        if not isinstance(content, list):
            return
        for chunk in content:
            if isinstance(chunk, models.ThinkChunk):
                self.parts += [c.text for c in chunk.thinking if isinstance(c, models.TextChunk)]
                if isinstance(chunk.signature, str) and chunk.signature:
                    self.signature = chunk.signature

    def said(self) -> ReasoningPart | None:
        """The reasoning so far, when there is some not yielded yet in this form (the same id: it replaces)."""
        if not self.parts and not self.signature:
            return None
        reasoning = Reasoning(
            format="mistral", id="thinking-0", signature=self.signature, summary=("".join(self.parts),)
        )
        if reasoning == self._said:
            return None
        self._said = reasoning
        return ReasoningPart(reasoning)


def _sampling(sampling: Sampling | None) -> dict[str, Any]:
    """The client's sampling as ``chat.stream_async`` takes it (Mistral's names); ``user`` is not sent."""
    if sampling is None:
        return {}
    given = sampling.given()
    given.pop("user", None)
    if "seed" in given:
        given["random_seed"] = given.pop("seed")
    return given


TOOL_CALL_ID = re.compile(r"[A-Za-z0-9]{9}")
"""The only tool-call ids Mistral takes (it refuses any other with ``invalid_function_call``, code 3280)."""
_ID_ALPHABET = string.ascii_letters + string.digits


def mapped_call_id(original: str, salt: int = 0) -> str:
    """9 letters or digits derived from ``original`` (a hash: the same id gives the same one in every request, so
    the prompt's prefix stays cached and each tool result keeps its call); ``salt`` gives another one."""
    seed = original if not salt else f"{original}\x00{salt}"
    n = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big")
    digits = []
    for _ in range(9):
        n, r = divmod(n, len(_ID_ALPHABET))
        digits.append(_ID_ALPHABET[r])
    return "".join(digits)


class CallIds:
    """The tool-call ids of one request as Mistral is sent them: its own (9 letters or digits) as they are, any
    other mapped (``mapped_call_id``). Two ids never get the same one within the request: on a clash the later id
    takes its next candidate, so an id's mapping depends only on the ids before it (a conversation's prefix keeps
    its mapping as it grows)."""

    def __init__(self) -> None:
        self._sent: dict[str, str] = {}
        self._taken: set[str] = set()

    def __call__(self, original: str | None) -> str:
        original = original or ""
        sent = self._sent.get(original)
        if sent is not None:
            return sent
        candidate = original if TOOL_CALL_ID.fullmatch(original) else mapped_call_id(original)
        salt = 0
        while candidate in self._taken:
            salt += 1
            candidate = mapped_call_id(original, salt)
        self._taken.add(candidate)
        self._sent[original] = candidate
        return candidate


def mistral_messages(
    messages: tuple[Message, ...], model: str = ""
) -> list[models.ChatCompletionStreamRequestMessageTypedDict]:
    """The conversation as Mistral takes it (its message rules, see the module's docstring), for ``model`` (its name
    at Mistral: the thinking it wrote goes back).

    The engine already writes its notes to the model into the last tool result; a user (or system) message right
    after a tool message that still comes (an API client's history) is appended to that tool result's content
    rather than refused by Mistral, and logged. An assistant message with neither text, tool calls nor thinking is left
    out.
    """
    ids = CallIds()
    out: list[models.ChatCompletionStreamRequestMessageTypedDict] = []
    last_tool: models.ToolMessageTypedDict | None = None  # the message just sent, when it is a tool result
    for m in messages:
        if m.role == "assistant" and not m.content and not m.tool_calls and not _thinking_of(m, model):
            continue
        if m.role in ("user", "system") and last_tool is not None:  # Mistral takes only these two after a tool
            log.warning(
                "a %s message right after a tool message: sent to Mistral in that tool result's content", m.role
            )
            before = last_tool["content"]
            last_tool["content"] = f"{before}\n\n{m.content}" if before else m.content
            continue
        if m.role == "tool":
            last_tool = _tool_message(m, ids)
            out.append(last_tool)
        else:
            last_tool = None
            out.append(_message(m, ids, model))
    return out


def _tool_message(m: Message, ids: CallIds) -> models.ToolMessageTypedDict:
    return models.ToolMessageTypedDict(role="tool", content=m.content, tool_call_id=ids(m.tool_call_id), name=m.name)


def _message(m: Message, ids: CallIds, model: str) -> models.ChatCompletionStreamRequestMessageTypedDict:
    """``m`` on Mistral's wire; an assistant turn's thinking goes back when ``model`` (its name at Mistral) had it."""
    if m.role == "system":
        return models.SystemMessageTypedDict(role="system", content=m.content)
    if m.role == "user":
        return models.UserMessageTypedDict(role="user", content=m.content)
    if m.role == "tool":
        return _tool_message(m, ids)
    thinking = _thinking_of(m, model)
    if thinking:
        text: list[models.ContentChunkTypedDict] = [{"type": "text", "text": m.content}] if m.content else []
        message = models.AssistantMessageTypedDict(role="assistant", content=[*thinking, *text])
    else:
        message = models.AssistantMessageTypedDict(role="assistant", content=m.content or None)
    if m.tool_calls:
        message["tool_calls"] = [
            models.ToolCallTypedDict(id=ids(c.id), type="function", function={"name": c.name, "arguments": c.arguments})
            for c in m.tool_calls
        ]
    return message


def _thinking_of(m: Message, model: str) -> list[models.ThinkChunkTypedDict]:
    """The thinking of an assistant turn that goes back to ``model``: Mistral's, written by that model."""
    return [_thinking(r) for r in m.reasoning if r.format == "mistral" and r.model in ("", model)]


def _thinking(r: Reasoning) -> models.ThinkChunkTypedDict:
    """A thinking chunk as it came: its text and its signature."""
    chunk = models.ThinkChunkTypedDict(type="thinking", thinking=[{"type": "text", "text": r.text}])
    if r.signature:
        chunk["signature"] = r.signature
    return chunk


def _tool(spec: ToolSpec) -> models.ToolTypedDict:
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
    }


def _tool_choice(request: ModelRequest) -> models.ChatCompletionStreamRequestToolChoiceTypedDict:
    choice = request.tool_choice
    if isinstance(choice, NamedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return "any" if choice == "required" else choice


def _text(content: Any) -> str:
    """The visible text of a delta: a string, or the text chunks of a list (thinking is gathered apart)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(c.text for c in content if isinstance(c, models.TextChunk))
    return ""


def _usage(u: models.UsageInfo) -> UsagePart:
    extra: Mapping[str, Any] = u.additional_properties or {}
    prompt_details = extra.get("prompt_tokens_details")
    completion_details = extra.get("completion_tokens_details")
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else extra.get("num_cached_tokens")
    reasoning = completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None
    return UsagePart(
        prompt_tokens=u.prompt_tokens or 0,
        completion_tokens=u.completion_tokens or 0,
        cached_prompt_tokens=int(cached or 0),
        reasoning_tokens=int(reasoning or 0),
    )


@contextmanager
def _translated() -> Iterator[None]:
    """The one place where the SDK's errors become the engine's."""
    try:
        yield
    except errors.ResponseValidationError as e:
        raise MalformedResponse(f"the Mistral server sent a chunk that cannot be read ({e.cause})") from e
    except errors.MistralError as e:
        _raise_for_status(e)
    except errors.NoResponseError as e:
        raise ModelUnavailable("the Mistral server sent no response") from e
    except httpx2.TimeoutException as e:
        raise ModelTimeout("Mistral did not answer in time") from e
    except (httpx2.StreamError, httpx2.DecodingError, json.JSONDecodeError) as e:
        raise MalformedResponse(f"the Mistral stream could not be read ({e})") from e
    except httpx2.HTTPError as e:
        raise ModelUnavailable(
            f"the connection to the Mistral server failed or broke off ({e})", unsent=isinstance(e, httpx2.ConnectError)
        ) from e


def _raise_for_status(e: errors.MistralError) -> NoReturn:
    raise status_error("Mistral", e.status_code, _detail(e), e.headers, "MISTRAL_API_KEY") from e


def _detail(e: errors.MistralError) -> str:
    try:
        body = json.loads(e.body)
    except (TypeError, ValueError):
        return e.body[:500] or e.message
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])
    return json.dumps(body)[:500]
