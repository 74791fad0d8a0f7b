"""The whole-server benchmark's scripted model server (``bench/scripted.py``) speaks the wire protocol our
OpenAI adapter reads: an agent's search, read and report, split tool-call deltas, usage with cached tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from assistant.engine.catalogue import ModelInfo
from assistant.engine.models.openai import OpenAIModel
from assistant.engine.providers.openai import OpenAIProvider
from assistant.engine.types import Message, ModelRequest, ModelResponse, ToolSpec
from bench import scripted

AGENT = ModelInfo(
    id="gpt-4o-mini",
    provider="openai",
    display_name="GPT-4o mini",
    input_price=0.15,
    cached_input_price=0.075,
    output_price=0.6,
    context_window=128_000,
    output_cap=4_096,
)
SEARCH = ToolSpec(
    "kb_search",
    "Search.",
    {"type": "object", "properties": {"query": {"type": "string"}, "kb": {"type": "string", "enum": ["factures"]}}},
)
READ = ToolSpec("kb_read", "Read.", {"type": "object", "properties": {"ids": {"type": "array"}}})
SUBMIT = ToolSpec("submit_result", "Report.", {"type": "object", "properties": {"findings": {"type": "string"}}})
TOOLS = (SEARCH, READ, SUBMIT)


@pytest.fixture
def server() -> Iterator[scripted.ThreadHandle]:
    handle = scripted.start()
    yield handle
    handle.stop()


async def _call(model: OpenAIModel, messages: tuple[Message, ...]) -> ModelResponse:
    response = ModelResponse()
    async for part in model.stream(ModelRequest(messages=messages, tools=TOOLS)):
        response.add(part)
    return response


async def test_an_agent_searches_reads_the_hits_and_reports(server: scripted.ThreadHandle) -> None:
    provider = OpenAIProvider(api_key="sk-test", base_url=server.base_url, timeout=10)
    model = OpenAIModel(AGENT, provider)
    messages: tuple[Message, ...] = (Message.system("You are an agent."), Message.user("Find the invoices."))

    first = await _call(model, messages)
    assert [c.name for c in first.tool_calls] == ["kb_search"]
    assert json.loads(first.tool_calls[0].arguments)["kb"] == "factures"
    assert first.usage is not None and first.usage.prompt_tokens > 0 and first.usage.cached_prompt_tokens == 0

    hits = json.dumps({"hits": [{"id": "doc-1"}, {"id": "doc-2"}, {"id": "doc-3"}, {"id": "doc-4"}]})
    messages += (
        Message(role="assistant", content="", tool_calls=(first.tool_calls[0],)),
        Message.tool(first.tool_calls[0], hits),
    )
    second = await _call(model, messages)
    assert [(c.name, json.loads(c.arguments)) for c in second.tool_calls] == [
        ("kb_read", {"ids": ["doc-1", "doc-2", "doc-3"]})
    ]

    documents = json.dumps({"documents": [{"id": "doc-1", "title": "Invoice F-1", "text": "Paid late."}]})
    messages += (
        Message(role="assistant", content="", tool_calls=(second.tool_calls[0],)),
        Message.tool(second.tool_calls[0], documents),
    )
    third = await _call(model, messages)
    assert [c.name for c in third.tool_calls] == ["submit_result"]
    report = json.loads(third.tool_calls[0].arguments)
    assert "Invoice F-1: Paid late. [doc-1]" in report["findings"] and report["sources"] == ["doc-1"]
    assert third.usage is not None and third.usage.cached_prompt_tokens > 0  # the earlier turns count as cached

    await provider.aclose()
    log = server.requests()
    assert [r["answer"] for r in log] == [["kb_search"], ["kb_read"], ["submit_result"]]
    assert all(r["stream"] for r in log) and log[0]["arrived"] <= log[1]["arrived"] <= log[2]["arrived"]


def test_the_main_model_delegates_two_tasks_then_answers_not_streamed(server: scripted.ThreadHandle) -> None:
    client = openai.OpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
    with client:
        _delegate_then_answer(client)


def _delegate_then_answer(client: openai.OpenAI) -> None:
    agents = {
        "type": "function",
        "function": {
            "name": "agents",
            "parameters": {
                "type": "object",
                "properties": {
                    "tasks": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "model": {"type": "string", "enum": ["demo-small", "gpt-4o-mini"]},
                                "resources": {"type": "array", "items": {"enum": ["kb:factures", "kb:comptes-rendus"]}},
                            },
                        },
                    }
                },
            },
        },
    }
    question: list[dict[str, object]] = [{"role": "user", "content": "Bimbamjob?"}]
    done = client.chat.completions.create(model="gpt-4.1", messages=question, tools=[agents])  # type: ignore[arg-type, list-item]  # plain dicts, as the benchmark's peer sends them
    calls = done.choices[0].message.tool_calls or []
    assert done.choices[0].finish_reason == "tool_calls" and len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    tasks = json.loads(call.function.arguments)["tasks"]
    assert [(t["model"], t["resources"]) for t in tasks] == [
        ("gpt-4o-mini", ["kb:factures"]),
        ("gpt-4o-mini", ["kb:comptes-rendus"]),
    ]
    assert done.usage is not None and done.usage.prompt_tokens_details is not None

    answered = [
        *question,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"agents": []})},
    ]
    final = client.chat.completions.create(model="gpt-4.1", messages=answered, tools=[agents])  # type: ignore[arg-type, list-item]  # plain dicts, as the benchmark's peer sends them
    assert final.choices[0].finish_reason == "stop" and final.choices[0].message.content == scripted.FINAL_ANSWER
