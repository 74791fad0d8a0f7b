"""A delegated run through the API, as its spans and metrics say it: one trace, its tree, and token counts and
costs equal to its steps'; no message content unless asked for."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any, cast

import httpx2
import pytest
from asgiref.sync import sync_to_async
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import ReadableSpan

from assistant.engine.events import AgentAction, AgentStarted, ModelCallFailed, ToolCallEvent, UsageEvent
from assistant.runs.models import Run
from assistant.runs.steps import events_of
from assistant.telemetry.content import ContentMode
from tests.asgi_app import asgi_transport
from tests.telemetry.telemetry_support import QUESTION, Exported, ask

pytestmark = pytest.mark.django_db(transaction=True)


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _usage(span: ReadableSpan) -> tuple[Any, ...]:
    a = span.attributes or {}
    return (
        a["gen_ai.request.model"],
        a["gen_ai.usage.input_tokens"],
        a["gen_ai.usage.output_tokens"],
        a["gen_ai.usage.cache_read.input_tokens"],
        a["gen_ai.usage.reasoning.output_tokens"],
        a["gen_ai.usage.cost.amount"],
    )


def _of_event(e: UsageEvent) -> tuple[Any, ...]:
    return (e.model, e.prompt_tokens, e.completion_tokens, e.cached_prompt_tokens, e.reasoning_tokens, e.cost_eur)


async def test_a_delegated_run_is_one_trace_whose_tree_tokens_and_costs_are_its_steps(
    fast_demo: None, exported: Exported
) -> None:
    data = (await ask()).json()
    run = await Run.objects.aget(pk=uuid.UUID(data["run_id"]))
    events = await sync_to_async(lambda: events_of(run.steps.order_by("seq")))()
    spans = list(exported.spans.get_finished_spans())

    assert len({s.context.trace_id for s in spans}) == 1  # one trace
    # The request's server span (its route, its status), the run's span its only child.
    [server] = [s for s in spans if s.parent is None]
    assert (server.name, server.kind) == ("POST /v1/chat/completions", trace_api.SpanKind.SERVER)
    assert (server.attributes or {})["http.route"] == "/v1/chat/completions"
    assert (server.attributes or {})["http.response.status_code"] == 200
    roots = _children(spans, server)
    assert [s.name for s in roots] == ["invoke_agent assistant"]
    root = roots[0]
    attributes = root.attributes or {}
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.conversation.id"] == str(run.conversation_id)
    assert attributes["assistant.organisation"] == "demo"
    assert attributes["assistant.run.status"] == run.status == "ok"
    assert attributes["assistant.run.reason_code"] == ""
    assert attributes["assistant.run.cost_eur"] == run.cost_eur  # to the last bit

    # The main model: its chat spans (one per usage step of the main model) and its tool calls, under the run.
    main_usage = [e for e in events if isinstance(e, UsageEvent) and e.agent_id is None]
    under_root = _children(spans, root)
    main_chats = [s for s in under_root if s.name.startswith("chat ")]
    assert sorted(map(_usage, main_chats)) == sorted(map(_of_event, main_usage))
    assert all(s.name == "chat demo-large" and s.kind == trace_api.SpanKind.CLIENT for s in main_chats)
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    tools = [s for s in under_root if s.name.startswith("execute_tool ")]
    assert sorted(s.name for s in tools) == sorted(f"execute_tool {c.name}" for c in calls)
    assert {(s.attributes or {})["gen_ai.tool.call.id"] for s in tools} == {c.call_id for c in calls}
    assert len(under_root) == len(main_chats) + len(tools)

    # Each agent under the `agents` call that launched it, with its own chat and tool spans, its cost its step's.
    started = [e for e in events if isinstance(e, AgentStarted)]
    finished = {e.agent_id: e for e in events if e.kind == "agent_finished"}
    assert len(started) == 2
    by_call = {(s.attributes or {})["gen_ai.tool.call.id"]: s for s in tools}
    for agent in started:
        delegation = by_call[agent.call_id]
        assert delegation.name == "execute_tool agents"
        [span] = [s for s in _children(spans, delegation) if (s.attributes or {})["gen_ai.agent.id"] == agent.agent_id]
        a = span.attributes or {}
        assert span.name == f"invoke_agent {agent.profile or 'agent'}"
        end = finished[agent.agent_id]
        assert (a["assistant.agent.status"], a["assistant.agent.rounds"], a["assistant.agent.cost_eur"]) == (
            end.status, end.rounds, end.cost_eur
        )  # fmt: skip
        assert a["assistant.agent.forced_landing"] == end.forced_landing
        assert "gen_ai.usage.cost.amount" not in a  # a backend summing the calls' costs counts each once
        own = _children(spans, span)
        usage = [e for e in events if isinstance(e, UsageEvent) and e.agent_id == agent.agent_id]
        assert sorted(map(_usage, [s for s in own if s.name.startswith("chat ")])) == sorted(map(_of_event, usage))
        actions = [e for e in events if isinstance(e, AgentAction) and e.agent_id == agent.agent_id and e.call_id]
        agent_tools = [s for s in own if s.name.startswith("execute_tool ")]
        assert sorted(s.name for s in agent_tools) == sorted(f"execute_tool {e.action.tool}" for e in actions)
        assert all(s.start_time is not None and s.end_time is not None and s.start_time <= s.end_time for s in own)
        assert len(own) == len(usage) + len(actions)

    # Every span of the request is one of those: the server's, the run, its chats and tools, the agents' and theirs.
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    usage_all = [e for e in events if isinstance(e, UsageEvent)]
    assert not failed
    agent_actions = [e for e in events if isinstance(e, AgentAction) and e.call_id]
    assert len(spans) == 2 + len(usage_all) + len(calls) + len(started) + len(agent_actions)
    # The cost is on the chat spans only; their sum is the run's.
    costs = [cast(float, (s.attributes or {}).get("gen_ai.usage.cost.amount", 0)) for s in spans]  # a number or none
    assert sum(costs) == pytest.approx(run.cost_eur)
    assert {(s.attributes or {}).get("gen_ai.usage.cost.currency") for s in spans if s.name.startswith("chat ")} == {
        "EUR"
    }

    # Metrics: the tokens of every call, the run and its agents counted by status.
    tokens = Counter[str]()
    for point in exported.metric_points("gen_ai.client.token.usage"):
        tokens[point.attributes["gen_ai.token.type"]] += point.sum
    assert tokens["input"] == sum(e.prompt_tokens for e in usage_all)
    assert tokens["output"] == sum(e.completion_tokens for e in usage_all)
    durations = exported.metric_points("gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == len(usage_all)
    [runs] = exported.metric_points("assistant.runs")
    assert runs.value == 1 and runs.attributes["assistant.run.status"] == "ok"
    assert sum(p.value for p in exported.metric_points("assistant.agents")) == 2

    # No content: neither the question nor the answer nor an instruction leaves.
    texts = [str(v) for s in spans for v in (s.attributes or {}).values()]
    assert not any(QUESTION[:20] in t or "Bimbamjob" in t for t in texts)
    assert not any(
        k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg"))
        for s in spans
        for k in (s.attributes or {})
    )
    assert exported.logs.get_finished_logs() == ()


@pytest.mark.parametrize("exported", [ContentMode.SPAN_ONLY], indirect=True)
async def test_content_on_spans_when_asked(fast_demo: None, exported: Exported) -> None:
    data = (await ask()).json()
    spans = list(exported.spans.get_finished_spans())
    [root] = [s for s in spans if s.name == "invoke_agent assistant"]
    asked = json.loads(str((root.attributes or {})["gen_ai.input.messages"]))
    assert asked == [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    answered = json.loads(str((root.attributes or {})["gen_ai.output.messages"]))
    assert answered[0]["parts"][0]["content"] == data["choices"][0]["message"]["content"]
    agents = [s for s in spans if s.name.startswith("invoke_agent ") and s.parent is not None]
    assert all("gen_ai.input.messages" in (s.attributes or {}) for s in agents)
    assert exported.logs.get_finished_logs() == ()


@pytest.mark.parametrize("exported", [ContentMode.EVENT_ONLY], indirect=True)
async def test_content_as_events_only_when_asked(fast_demo: None, exported: Exported) -> None:
    await ask()
    spans = list(exported.spans.get_finished_spans())
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output")) for s in spans for k in (s.attributes or {}))
    logs = exported.logs.get_finished_logs()
    assert len(logs) == 3  # the run and its two agents
    assert {log.log_record.event_name for log in logs} == {"gen_ai.client.inference.operation.details"}
    [root] = [s for s in spans if s.name == "invoke_agent assistant"]
    run_event = [log for log in logs if log.log_record.span_id == root.context.span_id]
    assert QUESTION in str((run_event[0].log_record.attributes or {})["gen_ai.input.messages"])


async def test_the_callers_trace_context_comes_with_the_run(fast_demo: None, exported: Exported) -> None:
    """A span around the call in this process has the request and its run in its trace."""
    caller = exported.telemetry.tracer.start_span("caller")
    with trace_api.use_span(caller, end_on_exit=True):
        await ask()
    spans = exported.spans.get_finished_spans()
    [server] = [s for s in spans if s.kind == trace_api.SpanKind.SERVER]
    [root] = [s for s in spans if s.name == "invoke_agent assistant"]
    assert server.parent is not None and server.parent.span_id == caller.get_span_context().span_id
    assert root.parent is not None and root.parent.span_id == server.context.span_id
    assert root.context.trace_id == caller.get_span_context().trace_id


async def test_a_client_that_sends_traceparent_finds_the_run_in_its_trace(fast_demo: None, exported: Exported) -> None:
    """A client on another machine sends W3C ``traceparent``: the request's server span is the child of the client's
    span, the run's span the child of the server's; the query string is not recorded."""
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    await ask(headers={"traceparent": f"00-{trace_id}-{span_id}-01"})
    spans = exported.spans.get_finished_spans()
    [server] = [s for s in spans if s.kind == trace_api.SpanKind.SERVER]
    assert server.parent is not None and server.parent.is_remote
    assert (format(server.context.trace_id, "032x"), format(server.parent.span_id, "016x")) == (trace_id, span_id)
    [root] = [s for s in spans if s.name == "invoke_agent assistant"]
    assert root.parent is not None and root.parent.span_id == server.context.span_id
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id}
    a = server.attributes or {}
    assert (a["http.request.method"], a["url.path"], a["url.scheme"]) == ("POST", "/v1/chat/completions", "http")
    assert not any("?" in str(v) for v in a.values())


async def test_a_refused_request_is_a_server_span_with_its_status(exported: Exported) -> None:
    """No run: the request's span alone, with its status; a client error is not the server's error."""

    async with httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver") as c:
        response = await c.post("/v1/chat/completions?key=secret", json={"model": "demo-large", "messages": []})
    assert response.status_code == 401
    [server] = exported.spans.get_finished_spans()
    a = server.attributes or {}
    assert (server.name, a["http.response.status_code"]) == ("POST /v1/chat/completions", 401)
    assert server.status.status_code != trace_api.StatusCode.ERROR
    assert "secret" not in str(dict(a))
