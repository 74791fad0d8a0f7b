"""OpenAI's Responses API through the official ``openai`` SDK (``client.responses.create(stream=True, …)``).

For the catalogue entries that say so (OpenAI's reasoning models: the gpt-5 family, o3, o4-mini), beside the Chat
Completions adapter (``openai.py``), which stays for the others and for compatible servers that lack this API.

The request: the leading system messages as ``instructions``, the rest as input items (user and assistant messages,
each tool call a ``function_call`` item and each result a ``function_call_output`` item, both with the call's
``call_id``), the tools as functions, ``tool_choice`` (the forced landing names ``submit_result``), the output cap as
``max_output_tokens`` (it counts the reasoning), ``prompt_cache_key``, and nothing stored on OpenAI's side
(``store: false``). A model that reasons is sent ``reasoning: {effort, summary: "auto"}`` and asked for its reasoning
encrypted (``include: ["reasoning.encrypted_content"]``): each ``reasoning`` item of its answer comes back to the loop
as a ``Reasoning`` part of the turn, and goes back verbatim (its id, its summary, its encrypted content) in the next
requests of that loop, in its place before the items that followed it. An organisation that OpenAI has not verified
gets a 400 ``unsupported_value`` on ``reasoning.summary``: the call is sent again at once without the summary, and
this key is never asked for one again (its reasoning is then said ``summary_unavailable``).

The stream: text deltas as they arrive (``response.output_text.delta``), each reasoning item when it is done
(``response.output_item.done``: its encrypted content is complete only then), tool calls whole at the end, the
usage of ``response.completed`` (or ``response.incomplete``: cut at the output cap) with cached input and reasoning
tokens. SDK errors become engine errors as in the Chat Completions adapter; an ``error`` or ``response.failed``
event is a server error.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator
from typing import Any, cast

import openai

from ..errors import MalformedResponse, ModelError, ModelUnavailable
from ..providers.openai import OpenAIProvider
from ..types import (
    FinishPart,
    FinishReason,
    Message,
    ModelRequest,
    NamedTool,
    Reasoning,
    ReasoningPart,
    ResponseModel,
    Sampling,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolCallPart,
    UsagePart,
)
from .openai import REASONING_REFUSES, translated
from .streaming import ServedModel, prompt_cache_key

NOT_IN_RESPONSES = ("stop", "seed", "presence_penalty", "frequency_penalty")
"""Sampling parameters of Chat Completions that the Responses API does not take."""

_no_summary: set[str] = set()
"""The keys (a digest of the key and the server) whose organisation OpenAI refused reasoning summaries."""


class ResponsesModel(ServedModel[OpenAIProvider]):
    """One model served through an ``OpenAIProvider``'s Responses API; ``api_model`` is its name on the server."""

    def dropped(self, sampling: Sampling) -> tuple[str, ...]:
        """What the Responses API does not take (``stop``, ``seed``, the penalties), and what a reasoning model refuses
        (``temperature``, ``top_p``): not sent."""
        given = sampling.given()
        refused = (*NOT_IN_RESPONSES, *(REASONING_REFUSES if self.info.reasons else ()))
        return tuple(name for name in given if name in refused)

    @property
    def _key(self) -> str:
        client = self.provider.client
        return hashlib.sha256(f"{client.api_key}\n{self.provider.base_url}".encode()).hexdigest()

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        calls: dict[int, _Call] = {}
        usage: UsagePart | None = None
        status = ""
        incomplete = ""
        answered = ""
        summarised = self._key not in _no_summary
        try:
            with translated():
                try:
                    stream = await self._create(request, summary=summarised)
                except openai.BadRequestError as e:
                    if not (summarised and _refuses_summary(e)):
                        raise
                    _no_summary.add(self._key)
                    summarised = False
                    stream = await self._create(request, summary=False)
                async with stream:
                    async for event in stream:
                        kind = getattr(event, "type", "")
                        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
                            if event.delta:
                                yield TextDelta(str(event.delta))
                        elif kind == "response.output_item.added":
                            item = event.item
                            if getattr(item, "type", "") == "function_call":
                                calls[event.output_index] = _Call(len(calls), item.call_id, item.name, "")
                        elif kind == "response.function_call_arguments.delta":
                            call = calls.get(event.output_index)
                            if call is not None:
                                call.arguments += event.delta or ""
                        elif kind == "response.output_item.done":
                            item = event.item
                            item_type = getattr(item, "type", "")
                            if item_type == "reasoning":
                                yield ReasoningPart(self._reasoning(item, len(calls), summarised))
                            elif item_type == "function_call":
                                before = calls.get(event.output_index)
                                rank = before.rank if before is not None else len(calls)
                                calls[event.output_index] = _Call(rank, item.call_id, item.name, item.arguments or "")
                        elif kind in ("response.created", "response.in_progress"):
                            answered = str(getattr(event.response, "model", "") or "") or answered
                        elif kind in ("response.completed", "response.incomplete"):
                            response = event.response
                            answered = str(getattr(response, "model", "") or "") or answered
                            status = kind
                            if response.usage is not None:
                                usage = _usage(response.usage)
                            details = getattr(response, "incomplete_details", None)
                            incomplete = str(getattr(details, "reason", "") or "") if details else ""
                        elif kind == "response.failed":
                            error = getattr(event.response, "error", None)
                            if event.response.usage is not None:
                                usage = _usage(event.response.usage)
                            raise ModelUnavailable(f"the OpenAI server failed while answering: {_said(error)}")
                        elif kind == "error":
                            raise ModelUnavailable(
                                f"the OpenAI server reported an error while answering: {_said(event)}"
                            )
        except ModelError:
            if usage is not None:  # the provider reported the call's usage before it broke off: that is billed
                yield usage
            raise
        if not status:
            raise MalformedResponse("the stream ended before the model finished its answer")
        if answered:
            yield ResponseModel(answered)
        complete = [c.call() for c in sorted(calls.values(), key=lambda c: c.rank)]
        for done in complete:
            yield ToolCallPart(done)
        if usage is not None:
            yield usage
        reason: FinishReason = "length" if incomplete == "max_output_tokens" else "stop"
        yield FinishPart("tool_calls" if complete and reason != "length" else reason)

    def _reasoning(self, item: Any, before: int, summarised: bool) -> Reasoning:
        summary = tuple(str(getattr(s, "text", "") or "") for s in (getattr(item, "summary", None) or ()))
        return Reasoning(
            format="openai",
            model=self.api_model,
            id=str(item.id or ""),
            encrypted=str(getattr(item, "encrypted_content", "") or ""),
            summary=summary,
            summary_unavailable=not summarised,
            before=before,
        )

    async def _create(self, request: ModelRequest, *, summary: bool) -> openai.AsyncStream[Any]:
        instructions, items = _input(request.messages, self.api_model)
        options: dict[str, Any] = {}
        if instructions:
            options["instructions"] = instructions
        if request.tools:
            options["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
            options["tool_choice"] = _tool_choice(request)
            options["parallel_tool_calls"] = request.parallel_tool_calls
        if request.max_output_tokens is not None:
            options["max_output_tokens"] = request.max_output_tokens
        if self.info.reasons:
            effort = self.info.effort_for(request.reasoning_effort)
            options["reasoning"] = {
                **({"effort": effort} if effort else {}),
                **({"summary": "auto"} if summary else {}),
            }
            options["include"] = ["reasoning.encrypted_content"]
        if request.sampling is not None:
            dropped = self.dropped(request.sampling)
            given = {k: v for k, v in request.sampling.given().items() if k not in dropped}
            response_format = given.pop("response_format", None)
            if response_format is not None:
                options["text"] = {"format": _text_format(response_format)}
            options.update(given)
        # Built as plain dicts (the SDK's TypedDicts say the same): ``input`` and the options are typed Any for it.
        stream = await self.provider.client.responses.create(
            model=self.api_model,
            input=cast(Any, items),
            stream=True,
            store=False,
            prompt_cache_key=prompt_cache_key(request.messages),
            **options,
        )
        return cast("openai.AsyncStream[Any]", stream)


class _Call:
    """A function call of the answer: its rank among the calls, its id, its name and its arguments so far."""

    __slots__ = ("arguments", "id", "name", "rank")

    def __init__(self, rank: int, call_id: str, name: str, arguments: str) -> None:
        self.rank, self.id, self.name, self.arguments = rank, call_id, name, arguments

    def call(self) -> ToolCall:
        if not self.name:
            raise MalformedResponse("the model streamed a function call without a name")
        return ToolCall(id=self.id, name=self.name, arguments=self.arguments or "{}")


def _input(messages: tuple[Message, ...], model: str) -> tuple[str, list[dict[str, Any]]]:
    """The leading system messages as instructions, and every other message as input items."""
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    instructions = "\n\n".join(m.content for m in messages[:lead])
    items: list[dict[str, Any]] = []
    for m in messages[lead:]:
        if m.role == "assistant":
            items += _turn(m, model)
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id or "", "output": m.content})
        else:
            items.append({"role": m.role, "content": m.content})
    return instructions, items


def _turn(m: Message, model: str) -> list[dict[str, Any]]:
    """An assistant turn as its output items were: each reasoning before the item that followed it, the text after
    the reasoning that came first, then the calls. Only this model's reasoning goes back (another's is refused)."""
    reasoning = [r for r in m.reasoning if r.format == "openai" and r.model in ("", model) and r.encrypted]
    items = [_reasoning_item(r) for r in reasoning if r.before <= 0]
    if m.content:
        items.append({"role": "assistant", "content": m.content})
    for i, call in enumerate(m.tool_calls):
        if i:
            items += [_reasoning_item(r) for r in reasoning if r.before == i]
        items.append({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments})
    items += [_reasoning_item(r) for r in reasoning if r.before >= max(1, len(m.tool_calls))]
    return items


def _reasoning_item(r: Reasoning) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": r.id,
        "summary": [{"type": "summary_text", "text": text} for text in r.summary],
        "encrypted_content": r.encrypted,
    }


def _tool_choice(request: ModelRequest) -> Any:
    choice = request.tool_choice
    if isinstance(choice, NamedTool):
        return {"type": "function", "name": choice.name}
    return choice


def _text_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """Chat Completions' ``response_format`` as the Responses API's ``text.format``."""
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema") or {}
        return {"type": "json_schema", **schema}
    return dict(response_format)


def _usage(u: Any) -> UsagePart:
    input_details = getattr(u, "input_tokens_details", None)
    output_details = getattr(u, "output_tokens_details", None)
    return UsagePart(
        prompt_tokens=int(getattr(u, "input_tokens", 0) or 0),
        completion_tokens=int(getattr(u, "output_tokens", 0) or 0),
        cached_prompt_tokens=int(getattr(input_details, "cached_tokens", 0) or 0),
        reasoning_tokens=int(getattr(output_details, "reasoning_tokens", 0) or 0),
    )


def _refuses_summary(e: openai.BadRequestError) -> bool:
    """OpenAI's answer to a reasoning summary asked by an organisation it has not verified."""
    body = e.body if isinstance(e.body, dict) else {}
    code = e.code or body.get("code")
    param = e.param or body.get("param")
    return code == "unsupported_value" and param == "reasoning.summary"


def _said(error: Any) -> str:
    if error is None:
        return "no detail"
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or "no detail"
    return f"{message} ({code})" if code else str(message)
