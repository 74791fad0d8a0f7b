"""OpenAI's Responses API, through the ``openai`` SDK against the local server speaking its streaming events.

A delegated run on gpt-5 with agents on gpt-5-mini: every reasoning item each loop received goes back in every later
request of that loop, verbatim and in its place (the server refuses it otherwise, as OpenAI does), never to another
loop; what the server reported is billed exactly (reasoning at the output price, in the agents' token budgets);
each round's summary is a ``reasoning`` step. Then the request's shapes, the summary an unverified organisation
is refused, the output cap, and the server's own refusals.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Any

import openai
import pytest

from assistant.catalogue.loading import infos_from_file
from assistant.engine.catalogue import Catalogue
from assistant.engine.errors import MalformedResponse
from assistant.engine.events import AgentFinished, Event, ReasoningEvent, UsageEvent
from assistant.engine.loop import run_chat
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tokens import prompt_tokens
from assistant.engine.tools import Toolbox
from assistant.engine.types import (
    FinishPart,
    Message,
    ModelRequest,
    ModelResponse,
    NamedTool,
    Reasoning,
    Sampling,
    ToolCall,
    UsagePart,
)
from tests.providers.provider_support import PLAIN, Brain, Wire, check_billed_as_reported
from tests.providers.test_billing import REQUEST, harness
from tests.providers.test_provider_scenario import KNOWLEDGE, QUESTION
from tests.providers.wire import Reply, Turn, Usage, sse_reply
from tests.waiting import until

pytestmark = pytest.mark.parametrize("server", ["responses"], indirect=True)

SHIPPED = {m.id: m for m in infos_from_file()}
NAMES = {"gpt-5": "gpt-5", "gpt-5-mini": "gpt-5-mini"}


def _issued(reply: Reply) -> list[str]:
    """The reasoning items a reply gave, in order (their ids)."""
    return [
        e["item"]["id"]
        for e in reply.events
        if isinstance(e, dict) and e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    ]


def _sent(body: dict[str, Any]) -> list[str]:
    return [item["id"] for item in body["input"] if item.get("type") == "reasoning"]


def _loop(body: dict[str, Any]) -> str:
    """Which loop a request is of: the main model's, or an agent's (by its instruction)."""
    if body["model"] == "gpt-5":
        return "main"
    instruction: str = next(i["content"] for i in body["input"] if i.get("role") == "user")
    return instruction


def _delegated_run(wire: Wire) -> tuple[RunContext, RunRequest, list[Event]]:
    """gpt-5 delegating to gpt-5-mini through the local server: the run's context, its request, the events it emits."""
    for model_id in NAMES:
        wire.model(SHIPPED[model_id], api_model=NAMES[model_id])
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ctx = RunContext(
        catalogue=Catalogue([SHIPPED["gpt-5"], SHIPPED["gpt-5-mini"]]),
        models=wire.models.__getitem__,
        toolbox=Toolbox(knowledge=KNOWLEDGE),
        emit=emit,
    )
    request = RunRequest(
        messages=(Message.user(QUESTION),),
        model="gpt-5",
        level="approfondi",
        resources=("kb:factures", "kb:comptes-rendus", "agents"),
    )
    return ctx, request, events


async def test_a_delegated_run_sends_every_reasoning_item_back_in_its_loop_and_bills_exactly(wire: Wire) -> None:
    brain = Brain("responses", NAMES)
    wire.server.brain = brain
    ctx, request, events = _delegated_run(wire)
    outcome = await run_chat(request, ctx)

    assert outcome.status == "ok", outcome.error
    assert wire.server.refused == []  # nothing the real API would refuse
    first, second = sorted(outcome.agents, key=lambda a: a.task.resources)[::-1]
    assert (first.status, second.status, second.forced_landing) == ("ok", "interrupted", True)

    # Every request: nothing stored, the reasoning encrypted and summarised, the loop's cache key, the level's effort.
    bodies = [r.body for r in wire.server.requests]
    assert all(r.path == "/v1/responses" for r in wire.server.requests)
    for body in bodies:
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"effort": "high", "summary": "auto"}
        assert body["prompt_cache_key"] and body["stream"] is True and "messages" not in body
    forced = [b["tool_choice"] for b in bodies if isinstance(b.get("tool_choice"), dict)]
    assert forced == [{"type": "function", "name": "submit_result"}]

    # Each loop's every request carries every reasoning item its earlier answers gave, in order; no other loop's.
    by_loop: dict[str, list[int]] = defaultdict(list)
    for index, body in enumerate(bodies):
        by_loop[_loop(body)].append(index)
    assert len(by_loop) == 3 and len(by_loop["main"]) == 2
    issued_to = {
        loop: {i for n in indexes for i in _issued(wire.server.replies[n])} for loop, indexes in by_loop.items()
    }
    for loop, indexes in by_loop.items():
        given: list[str] = []
        for n in indexes:
            assert _sent(bodies[n]) == given, (loop, n)
            given = given + _issued(wire.server.replies[n])
        assert len(given) == len(indexes)  # each answer reasoned once
        others = set().union(*(ids for other, ids in issued_to.items() if other != loop))
        assert not others & {i for n in indexes for i in _sent(bodies[n])}
        if loop != "main":
            assert QUESTION not in json.dumps(bodies[indexes[0]]) and QUESTION not in json.dumps(bodies[indexes[-1]])
    # In its place: before the function call that followed it (the server checks it too).
    last = bodies[by_loop["main"][-1]]["input"]
    kinds = [item.get("type", "message") for item in last]
    assert kinds == ["message", "reasoning", "message", "function_call", "function_call_output"]

    # Each round's summary, the main model's and each agent's, in its steps.
    shown = [e for e in events if isinstance(e, ReasoningEvent)]
    assert len(shown) == len(bodies) and all(e.summary.startswith("Thinking gpt-5") for e in shown)
    assert [(e.round, e.model) for e in shown if e.agent_id is None] == [(1, "gpt-5"), (2, "gpt-5")]

    # Billed exactly what the server reported: reasoning tokens counted, and billed at the output price.
    check_billed_as_reported(ctx.usage, ctx.catalogue, brain)
    for model_id in brain.reported:
        assert ctx.usage.by_model[model_id].reasoning_tokens > 0
        assert ctx.usage.as_data().by_model[model_id].reasoning_tokens == ctx.usage.by_model[model_id].reasoning_tokens
    # An agent's token budget counts its reasoning: its output tokens include it.
    for finished in (e for e in events if isinstance(e, AgentFinished)):
        mini = finished.usage.by_model["gpt-5-mini"]
        assert mini.completion_tokens >= mini.reasoning_tokens > 0


async def test_request_shapes_tool_calls_and_results_with_call_ids(wire: Wire) -> None:
    model = wire.model(SHIPPED["gpt-5-mini"], api_model="gpt-5-mini")
    wire.server.script(
        sse_reply(
            "responses",
            "gpt-5-mini",
            Turn("", (("kb_search", '{"query": "x"}'),), Usage(50, 30, 0, 20), thinking="Search first."),
        )
    )
    turn = Message.assistant(
        "Let me look.",
        (ToolCall("call_a", "kb_read", '{"ids": ["d1"]}'), ToolCall("call_b", "kb_search", '{"query": "y"}')),
    )
    request = ModelRequest(
        messages=(
            Message.system("Be brief."),
            Message.user("Find x."),
            turn,
            Message.tool(turn.tool_calls[0], '{"documents": []}'),
            Message.tool(turn.tool_calls[1], '{"hits": []}'),
        ),
        tools=(REQUEST.tools[0],),
        tool_choice=NamedTool("kb_search"),
        max_output_tokens=900,
        reasoning_effort="medium",
        sampling=Sampling(temperature=0.2, seed=3, user="u-1", response_format={"type": "json_object"}),
    )
    response = ModelResponse()
    async for part in model.stream(request):
        response.add(part)

    body = wire.server.requests[0].body
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"role": "user", "content": "Find x."},
        {"role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_a", "name": "kb_read", "arguments": '{"ids": ["d1"]}'},
        {"type": "function_call", "call_id": "call_b", "name": "kb_search", "arguments": '{"query": "y"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": '{"documents": []}'},
        {"type": "function_call_output", "call_id": "call_b", "output": '{"hits": []}'},
    ]
    assert body["tools"][0] == {
        "type": "function", "name": "kb_search", "description": REQUEST.tools[0].description,
        "parameters": REQUEST.tools[0].parameters, "strict": False,
    }  # fmt: skip
    assert body["tool_choice"] == {"type": "function", "name": "kb_search"}
    assert body["max_output_tokens"] == 900 and body["reasoning"] == {"effort": "medium", "summary": "auto"}
    # A reasoning model takes neither temperature nor a seed (the Responses API has no seed): not sent.
    assert "temperature" not in body and "seed" not in body
    assert body["user"] == "u-1" and body["text"] == {"format": {"type": "json_object"}}
    assert request.sampling is not None and model.dropped(request.sampling) == ("temperature", "seed")

    (reasoning,) = response.reasoning
    assert (reasoning.format, reasoning.model, reasoning.summary, reasoning.before) == (
        "openai", "gpt-5-mini", ("Search first.",), 0
    )  # fmt: skip
    assert reasoning.id.startswith("rs_") and reasoning.encrypted.startswith("gAAA")
    assert [c.name for c in response.tool_calls] == ["kb_search"] and response.tool_calls[0].id.startswith("call_")
    assert response.usage == UsagePart(50, 30, 0, 20) and response.finish_reason == "tool_calls"


async def test_an_unverified_organisation_is_asked_once_then_never_for_a_summary(wire: Wire) -> None:
    wire.server.refuse_summary = True
    h = harness(wire, SHIPPED["gpt-5"])
    wire.server.script(
        sse_reply("responses", "gpt-5", Turn("Hello.", thinking="Greet them.")),
        sse_reply("responses", "gpt-5", Turn("Again.", thinking="Greet again.")),
    )
    first = await h.ctx.call_model(
        "gpt-5", ModelRequest(messages=REQUEST.messages, reasoning_effort="low"), on_reasoning=_noted(h)
    )
    second = await h.ctx.call_model("gpt-5", ModelRequest(messages=REQUEST.messages, reasoning_effort="low"))

    bodies = [r.body for r in wire.server.requests]
    assert [b["reasoning"] for b in bodies] == [
        {"effort": "low", "summary": "auto"},
        {"effort": "low"},
        {"effort": "low"},
    ]
    assert [r.status for r in wire.server.refused] == [400]
    assert first.text == "Hello." and second.text == "Again."
    for response in (first, second):
        (reasoning,) = response.reasoning
        assert reasoning.summary == () and reasoning.summary_unavailable and reasoning.encrypted
    assert h.ctx.usage.calls == 2 and h.ctx.usage.failed_calls == 0  # the refused try billed nothing
    (shown,) = [e for e in h.events if isinstance(e, ReasoningEvent)]
    assert (shown.summary, shown.summary_unavailable) == ("", True)


def _noted(h: Any) -> Any:
    async def on_reasoning(reasoning: Reasoning) -> None:
        event = ReasoningEvent.of(reasoning, 1, "gpt-5")
        if event is not None:
            await h.ctx.emit(event)

    return on_reasoning


async def test_an_answer_cut_at_the_output_cap_finishes_with_length(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(sse_reply("responses", "plain", Turn("A long answer", finish="length", usage=Usage(40, 12))))
    parts = [p async for p in model.stream(ModelRequest(messages=REQUEST.messages, max_output_tokens=12))]
    assert parts[-1] == FinishPart("length") and UsagePart(40, 12) in parts
    body = wire.server.requests[0].body
    assert (
        body["max_output_tokens"] == 12 and "reasoning" not in body and "include" not in body
    )  # PLAIN does not reason


async def test_the_server_refuses_a_reasoning_item_without_its_encrypted_content(wire: Wire) -> None:
    client = wire.provider.client
    item = {"type": "reasoning", "id": "rs_00001", "summary": []}
    with pytest.raises(openai.NotFoundError, match="Items are not persisted when `store` is set to false"):
        await client.responses.create(model="gpt-5", input=[item, {"role": "user", "content": "Hi"}], store=False)  # type: ignore[call-overload, list-item]  # a reasoning item without its encrypted content, which the SDK's types rightly refuse
    forged = {**item, "encrypted_content": "gAAAforged"}
    with pytest.raises(openai.BadRequestError, match="could not be verified"):
        await client.responses.create(model="gpt-5", input=[forged, {"role": "user", "content": "Hi"}], store=False)  # type: ignore[call-overload, list-item]  # a forged reasoning item, sent raw as a client could


async def test_stop_closes_every_responses_stream_of_a_delegated_run_and_nothing_is_asked_after(wire: Wire) -> None:
    brain = Brain("responses", NAMES)

    def hanging_agents(body: dict[str, Any]) -> Reply:
        reply = brain(body)
        if body["model"] == "gpt-5":
            return reply
        # An agent reasons, starts its text, then its server hangs.
        first_text = next(n for n, e in enumerate(reply.events) if e["type"] == "response.output_text.delta")
        return Reply(events=reply.events, done=False, hang_after=first_text + 1, named=True)

    def agent_turn(body: dict[str, Any]) -> Any:
        return Turn("Looking at the invoices now.", (("kb_search", '{"query": "Bimbamjob"}'),))

    brain.agent = agent_turn  # type: ignore[method-assign]  # this brain's agents answer with a search, always
    wire.server.brain = hanging_agents
    ctx, request, events = _delegated_run(wire)
    run = asyncio.ensure_future(run_chat(request, ctx))

    def agents_reasoned() -> int:
        return sum(isinstance(e, ReasoningEvent) and e.agent_id is not None for e in events)

    await until(
        lambda: len(wire.server.hung) >= 2 and agents_reasoned() >= 2, "both agents' streams open and read from"
    )
    ctx.cancel.cancel()
    outcome = await run

    assert outcome.status == "stopped"
    assert [a.status for a in outcome.agents] == ["stopped", "stopped"]
    await until(lambda: len(wire.server.hung_up) >= 2, "both hanging streams closed by the adapter")
    assert sorted(wire.server.hung_up) == sorted(wire.server.hung) == [1, 2]  # both streams closed by the adapter
    assert len(wire.server.requests) == 3  # nothing asked after Stop
    # The main model's call billed as reported; each agent's hung call as an estimate of what it was sent.
    assert ctx.usage.by_model["gpt-5"].calls == 1 and ctx.usage.by_model["gpt-5"].tokens_estimated == 0
    mini = ctx.usage.by_model["gpt-5-mini"]
    assert mini.calls == 2 and mini.tokens_estimated == 2 and mini.failed_calls == 0


async def test_an_error_event_before_anything_is_tried_again_and_a_failed_response_bills_its_usage(wire: Wire) -> None:
    h = harness(wire)
    error = {"type": "error", "sequence_number": 0, "code": "server_error", "message": "The server had an error."}
    answer = sse_reply("responses", "plain", Turn("Made it.", usage=Usage(300, 9)))
    failed = list(sse_reply("responses", "plain", Turn("Half an", usage=None)).events[:-1])
    failed.append({"type": "response.failed", "sequence_number": 99, "response": {
        "id": "resp_x", "object": "response", "model": "plain", "status": "failed", "output": [],
        "error": {"code": "server_error", "message": "The model broke down."},
        "usage": Usage(250, 4).responses_wire()}})  # fmt: skip
    wire.server.script(
        Reply(events=(error,), done=False, named=True),
        answer,
        Reply(events=tuple(failed), done=False, named=True),
    )

    # An error event before anything was shown: tried again. The answer that followed is billed as reported, plus an
    # estimate of what the broken attempt was sent (it reached the server, as any stream cut before its first part).
    response = await h.ctx.call_model("plain", REQUEST)
    assert response.text == "Made it." and len(wire.server.requests) == 2 and response.cut_attempts == 1

    # A response that failed after its text had started: the call fails, billed what the server reported.
    with pytest.raises(MalformedResponse, match="The model broke down"):
        await h.ctx.call_model("plain", REQUEST)
    assert len(wire.server.requests) == 3  # not tried again: its text was shown
    billed = [e for e in h.events if isinstance(e, UsageEvent)]
    assert [(u.prompt_tokens, u.completion_tokens, u.estimated, u.failed) for u in billed] == [
        (300 + prompt_tokens(REQUEST), 9, True, False),
        (250, 4, False, True),
    ]
