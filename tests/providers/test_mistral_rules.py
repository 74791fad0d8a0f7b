"""Mistral's message rules: the wire server refuses what Mistral's API refuses, and the adapter (the real
``mistralai`` SDK) and the engine send only what it takes — tool-call ids mapped to its format, consistently
within a conversation; no user message right after a tool message; no field it does not know."""

from __future__ import annotations

import json
import logging
import re
import urllib.error
import urllib.request
from dataclasses import replace
from typing import Any

import pytest

from assistant.engine.agent import LANDING_NOTICE, run_agent
from assistant.engine.catalogue import Catalogue
from assistant.engine.events import Event, FinalEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import ROUND_LIMIT_NOTICE, run_chat
from assistant.engine.models.mistral import CallIds, mapped_call_id, mistral_messages
from assistant.engine.outcomes import AgentTask
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import ClientTools, Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from assistant.engine.usage import AgentBudget
from tests.providers.provider_support import PLAIN, Wire
from tests.providers.wire import Reply, Turn, WireServer, mistral_refusal, sse_reply

MISTRAL = pytest.mark.parametrize("server", ["mistral"], indirect=True)

MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")
REMINDER = ToolSpec(
    "send_reminder", "Send a payment reminder.", {"type": "object", "properties": {"invoice": {"type": "string"}}}
)
SEARCH = ToolSpec("kb_search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}}})
KNOWLEDGE = MemoryKnowledge(
    {
        "factures": [
            Document("doc-1", "factures", "Invoice F-2024-031", "Bimbamjob invoice of 18,400 EUR, paid late."),
            Document("doc-2", "factures", "Invoice F-2024-077", "Bimbamjob invoice of 6,250 EUR, unpaid."),
        ]
    }
)


def post(server: WireServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A raw request to the server (no SDK: the SDK itself leaves out the fields it does not know)."""
    request = urllib.request.Request(
        server.url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, {}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def call(call_id: str, name: str = "kb_search") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


USER = {"role": "user", "content": "Invoices?"}


@MISTRAL
def test_the_wire_server_refuses_what_mistrals_api_refuses(server: WireServer) -> None:
    server.script(*(sse_reply("mistral", "m", Turn("ok")) for _ in range(3)))
    # A user message right after a tool message.
    status, body = post(
        server,
        {
            "model": "m",
            "messages": [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("aB3dE5gH7")]},
                {"role": "tool", "content": "{}", "tool_call_id": "aB3dE5gH7", "name": "kb_search"},
                {"role": "user", "content": "[Answer now.]"},
            ],
        },
    )
    assert status == 400
    assert body == {
        "object": "error",
        "message": "Unexpected role 'user' after role 'tool'",
        "type": "invalid_request_message_order",
        "param": None,
        "code": "3230",
    }
    # A tool-call id Mistral did not generate.
    status, body = post(
        server,
        {
            "model": "m",
            "messages": [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("call_Xy12")]},
                {"role": "tool", "content": "{}", "tool_call_id": "call_Xy12"},
            ],
        },
    )
    assert (status, body["type"], body["code"]) == (400, "invalid_function_call", "3280")
    assert body["message"] == "Tool call id was call_Xy12 but must be a-z, A-Z, 0-9, with a length of 9."
    # A field it does not know, on a message or on the request.
    status, body = post(
        server,
        {
            "model": "m",
            "user": "client-7",
            "messages": [USER, {"role": "assistant", "content": "Hi.", "reasoning_content": "hmm"}, USER],
        },
    )
    assert status == 422
    assert [(d["type"], d["loc"]) for d in body["message"]["detail"]] == [
        ("extra_forbidden", ["body", "user"]),
        ("extra_forbidden", ["body", "messages", 1, "assistant", "reasoning_content"]),
    ]
    # Tool calls whose results are missing, and a conversation ending on the assistant.
    status, body = post(
        server, {"model": "m", "messages": [USER, {"role": "assistant", "tool_calls": [call("aB3dE5gH7")]}, USER]}
    )
    assert (status, body["code"], body["message"]) == (
        400,
        "3230",
        "Not the same number of function calls and responses",
    )
    status, body = post(server, {"model": "m", "messages": [USER, {"role": "assistant", "content": "Hi."}]})
    assert (status, body["code"]) == (400, "3230") and "Expected last role User or Tool" in body["message"]
    # None of them used a scripted reply; a valid request gets one.
    assert len(server.refused) == 5 and len(server.queue) == 3
    assert post(server, {"model": "m", "messages": [USER]})[0] == 200


def test_thinking_chunks_stream_in_magistrals_shape_with_their_signature_where_asked() -> None:
    for at in ("start", "end", "after"):
        reply = sse_reply(
            "mistral", "m", Turn("Paid late.", thinking="Two invoices here.", signature="c2ln", signature_at=at)
        )
        contents = [e["choices"][0]["delta"].get("content") for e in reply.events]
        chunks = [c for content in contents if isinstance(content, list) for c in content]
        assert "".join(t["text"] for c in chunks for t in c["thinking"]) == "Two invoices here."
        signed = [i for i, c in enumerate(chunks) if "signature" in c]
        assert [chunks[i]["signature"] for i in signed] == ["c2ln"]
        assert signed == [{"start": 0, "end": 2, "after": 3}[at]]
        text_at = next(i for i, c in enumerate(contents) if isinstance(c, str) and c)
        last_thinking = max(i for i, c in enumerate(contents) if isinstance(c, list))
        assert (last_thinking > text_at) == (at == "after")


def test_foreign_tool_call_ids_are_mapped_the_same_way_in_every_request() -> None:
    native = "aB3dE5gH7"
    history = (
        Message.system("Be brief."),
        Message.user("Invoices?"),
        Message.assistant("", (ToolCall("call_9Xb2LqTnPz0w1VbA3eRt5YuI", "kb_search"), ToolCall("c1", "kb_read"))),
        Message.tool(ToolCall("call_9Xb2LqTnPz0w1VbA3eRt5YuI", "kb_search"), "{}"),
        Message.tool(ToolCall("c1", "kb_read"), "{}"),
        Message.assistant("", (ToolCall(native, "kb_search"), ToolCall("call_3_0", "kb_search"))),
        Message.tool(ToolCall(native, "kb_search"), "{}"),
        Message.tool(ToolCall("call_3_0", "kb_search"), "{}"),
    )
    first = mistral_messages(history[:5])
    second = mistral_messages(history)
    assert second[:5] == first  # the prefix is sent the same: cached, and each result keeps its call
    sent = [c["id"] for m in second if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert results == sent and len(set(sent)) == 4
    assert all(MISTRAL_ID.fullmatch(i) for i in sent)
    assert sent[2] == native  # Mistral's own ids go back as they came
    assert sent[0] == mapped_call_id("call_9Xb2LqTnPz0w1VbA3eRt5YuI")
    assert mistral_refusal({"model": "m", "messages": second}) is None


def test_two_ids_never_get_the_same_mapped_id_within_a_request() -> None:
    ids = CallIds()
    mapped = ids("call_abc")
    # A later id that is (or maps to) the one already given takes another.
    clash = ids(mapped)
    assert clash != mapped and MISTRAL_ID.fullmatch(clash)
    assert ids("call_abc") == mapped and ids(mapped) == clash


def test_a_user_message_after_a_tool_message_goes_into_that_tool_result(caplog: pytest.LogCaptureFixture) -> None:
    history = (
        Message.user("Invoices?"),
        Message.assistant("", (ToolCall("c1", "kb_search"),)),
        Message.tool(ToolCall("c1", "kb_search"), '{"hits": []}'),
        Message.assistant(""),  # an answer with neither text nor tool calls: Mistral refuses it, it is left out
        Message.user("[Answer now.]"),
    )
    with caplog.at_level(logging.WARNING, logger="assistant.engine.models.mistral"):
        sent = mistral_messages(history)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[-1]["content"] == '{"hits": []}\n\n[Answer now.]'
    assert "a user message right after a tool message" in caplog.text
    assert mistral_refusal({"model": "m", "messages": sent}) is None


@MISTRAL
async def test_the_adapter_sends_a_clients_history_mistral_would_refuse_as_one_it_takes(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(sse_reply("mistral", "plain", Turn("Paid late.")))
    client_history = (
        Message.user("Invoices?"),
        Message.assistant("", (ToolCall("call_1f2e3d", "lookup"),)),
        Message.tool(ToolCall("call_1f2e3d", "lookup"), '{"paid": false}'),
        Message.user("And in 2023?"),
    )
    response = ModelResponse()
    async for part in model.stream(ModelRequest(messages=client_history, tools=(SEARCH,))):
        response.add(part)
    assert response.text == "Paid late." and wire.server.refused == []


@MISTRAL
async def test_an_agent_on_a_mistral_model_lands_and_relaunches_against_mistrals_rules(
    wire: Wire, caplog: pytest.LogCaptureFixture
) -> None:
    info = PLAIN
    wire.model(info)
    search = ("kb_search", json.dumps({"query": "Bimbamjob", "kb": "factures"}))
    read = ("kb_read", json.dumps({"ids": ["doc-1"]}))
    report = {"findings": "F-2024-031 was paid late [doc-1].", "sources": ["doc-1"], "gaps": []}
    wire.server.script(
        sse_reply("mistral", "plain", Turn(calls=(search,))),  # round 1
        sse_reply("mistral", "plain", Turn(calls=(read,))),  # round 2, forced: no result, so relaunched
        sse_reply("mistral", "plain", Turn(calls=(("submit_result", json.dumps(report)),))),
    )
    ctx = RunContext(catalogue=Catalogue([info]), models=wire.models.__getitem__, toolbox=Toolbox(knowledge=KNOWLEDGE))
    task = AgentTask(instruction="Find the invoices.", model=info, resources=("kb:factures",), max_rounds=2)

    with caplog.at_level(logging.WARNING, logger="assistant.engine.models.mistral"):
        outcome = await run_agent(ctx, "agent-1", task, AgentBudget(max_rounds=2), None)

    assert wire.server.refused == [], [r.body for r in wire.server.refused]
    assert "right after a tool message" not in caplog.text  # the engine wrote its notice in the tool result itself
    assert (outcome.status, outcome.forced_landing) == ("interrupted", True)
    assert "paid late [doc-1]" in outcome.report and outcome.rounds == 3 and outcome.tools_run == ["kb_search"]
    bodies = [r.body for r in wire.server.requests]
    assert len(bodies) == 3
    forced, relaunched = bodies[1], bodies[2]
    for body in (forced, relaunched):
        assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_result"}}
        assert body["messages"][-1]["role"] == "tool"
    # The landing notice reached the model in the last tool result, not as a user message after it.
    assert [m["role"] for m in forced["messages"]] == ["system", "user", "assistant", "tool"]
    assert LANDING_NOTICE in forced["messages"][-1]["content"]
    assert relaunched["messages"][: len(forced["messages"])] == forced["messages"]


@MISTRAL
async def test_the_main_loops_round_limit_reaches_a_mistral_model_against_its_rules(
    wire: Wire, caplog: pytest.LogCaptureFixture
) -> None:
    info = PLAIN
    wire.model(info)

    def brain(body: dict[str, Any]) -> Reply:
        if body.get("tools"):
            return sse_reply("mistral", "plain", Turn(calls=(("kb_search", json.dumps({"query": "Bimbamjob"})),)))
        return sse_reply("mistral", "plain", Turn("Bimbamjob paid late."))

    wire.server.brain = brain
    ctx = RunContext(catalogue=Catalogue([info]), models=wire.models.__getitem__, toolbox=Toolbox(knowledge=KNOWLEDGE))
    request = RunRequest(
        messages=(Message.user("Invoices?"),), model=info.id, level="rapide", resources=("kb:factures",)
    )

    with caplog.at_level(logging.WARNING, logger="assistant.engine.models.mistral"):
        outcome = await run_chat(request, ctx)

    assert wire.server.refused == [], [r.body for r in wire.server.refused]
    assert "right after a tool message" not in caplog.text  # the engine wrote its notice in the tool result itself
    assert outcome.status == "ok" and outcome.text == "Bimbamjob paid late."
    last = wire.server.requests[-1].body
    assert "tools" not in last and last["messages"][-1]["role"] == "tool"
    assert ROUND_LIMIT_NOTICE in last["messages"][-1]["content"]


@MISTRAL
async def test_a_client_tool_through_a_mistral_model_and_the_clients_follow_up_with_its_own_ids(wire: Wire) -> None:
    info = PLAIN
    wire.model(info)
    remind = ("send_reminder", json.dumps({"invoice": "F-2024-077"}))
    wire.server.script(
        sse_reply("mistral", "plain", Turn("I send the reminder.", (remind,))),
        sse_reply("mistral", "plain", Turn("Reminder sent; F-2024-077 is still due.")),
    )
    tools = ClientTools(specs=(REMINDER,))
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ctx = RunContext(
        catalogue=Catalogue([info]), models=wire.models.__getitem__, toolbox=Toolbox(knowledge=KNOWLEDGE), emit=emit
    )
    question = Message.user("Remind Bimbamjob of its unpaid invoice.")
    first = await run_chat(RunRequest(messages=(question,), model=info.id, client_tools=tools), ctx)
    [ended] = [e for e in events if isinstance(e, FinalEvent)]
    [called] = ended.tool_calls
    assert first.status == "ok" and called.name == "send_reminder"

    # The client sends the turn back with ids of its own (as one that continues an OpenAI conversation writes them).
    theirs = replace(called, id="call_" + "Zx9" * 8)
    history = tuple(
        replace(m, tool_calls=tuple(theirs if c == called else c for c in m.tool_calls)) for m in ended.messages
    )
    follow_up = (*history, Message.tool(theirs, '{"sent": true}'))
    outcome = await run_chat(RunRequest(messages=follow_up, model=info.id, client_tools=tools), ctx)

    assert wire.server.refused == [], [r.body for r in wire.server.refused]
    assert outcome.status == "ok" and outcome.text == "Reminder sent; F-2024-077 is still due."
    sent = wire.server.requests[-1].body["messages"]
    [assistant] = [m for m in sent if m.get("tool_calls")]
    [result] = [m for m in sent if m["role"] == "tool"]
    assert assistant["tool_calls"][0]["id"] == result["tool_call_id"] == mapped_call_id(theirs.id)
