"""The API as clients written for OpenAI see it, with a provider behind it: the official ``openai`` SDK (and
langchain-openai) against the ASGI app, whose models are served by the tests' wire server (the only fake: the
provider). A run that fails is an error to them, with OpenAI's statuses and the run's figures in it; a stopped run
is an answer."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import openai
import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from pytest_django.fixtures import Settings
from wire import Reply, Turn, Usage, WireServer, error_reply, sse_reply

from assistant.api.errors import run_failure
from assistant.asgi import application
from assistant.catalogue import snapshot
from assistant.catalogue.models import CatalogueEntry
from assistant.engine.causes import Cause
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "gpt-4o-mini"
QUESTION: Any = [{"role": "user", "content": "Bimbamjob: which invoices are unpaid?"}]


@pytest.fixture
def provider(settings: Settings) -> Iterator[WireServer]:
    """The OpenAI wire server as the app's only provider."""
    server = WireServer("openai").start()
    settings.DEMO_PACE = settings.DEMO_LATENCY = 0.0
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "sk-test", server.url + "/v1"
    settings.MISTRAL_API_KEY, settings.MISTRAL_BASE_URL = "", None
    snapshot.forget_catalogue()
    yield server
    snapshot.forget_catalogue()
    server.stop()


@pytest.fixture
async def secret(provider: WireServer) -> str:
    await sync_to_async(call_command)("load_catalogue", verbosity=0)
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    return (await sync_to_async(keys.create_key)(org, "clients"))[1]


@pytest.fixture
async def client(secret: str) -> AsyncIterator[openai.AsyncOpenAI]:
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=application), base_url="http://testserver", timeout=30)
    async with openai.AsyncOpenAI(
        base_url="http://testserver/v1", api_key=secret, http_client=http, max_retries=0
    ) as client:
        yield client
    await snapshot.aclose_providers()


USAGE = Usage(100, 20)


def answer(text: str, usage: Usage | None = USAGE, **reply: Any) -> Reply:
    """The main model's answer, streamed; ``reply``: how it is sent (``cut_after``, ``hang_after``)."""
    return sse_reply("openai", MODEL, Turn(text, usage=usage), **reply)


# A failed run is an error ------------------------------------------------------------------------------------------

# How the provider fails (each reply repeated past our retries), and what the client gets.
FAILURES = [
    pytest.param(error_reply("openai", 500, "overloaded"), 502, "upstream_error", id="5xx"),
    pytest.param(error_reply("openai", 429, "slow down", {"retry-after": "0"}), 429, "upstream_rate_limited", id="429"),
    pytest.param(error_reply("openai", 400, "flagged by the content filter"), 502, "upstream_rejected", id="4xx"),
    pytest.param(error_reply("openai", 401, "bad key"), 502, "upstream_auth", id="401"),
]


@pytest.mark.parametrize(("reply", "status", "code"), FAILURES)
async def test_a_run_the_provider_failed_is_an_error_with_the_runs_figures(
    client: openai.AsyncOpenAI, provider: WireServer, reply: Reply, status: int, code: str
) -> None:
    provider.script(*[reply] * 6)
    with pytest.raises(openai.APIStatusError) as raised:
        await client.chat.completions.create(model=MODEL, messages=QUESTION)
    e = raised.value
    assert e.status_code == status and e.code == code
    assert e.response.headers["x-should-retry"] == ("true" if status == 429 else "false")
    if status == 429:
        assert isinstance(e, openai.RateLimitError) and e.response.headers["retry-after"] == "1"
    body = e.body
    assert isinstance(body, dict)
    assert body["status"] == "error" and body["reason"] and body["run_id"]
    failed = [s for s in body["steps"] if s["type"] == "model_call_failed"]
    assert failed and failed[-1]["model"] == MODEL
    assert body["usage"]["failed_calls"] >= 1 and "cost_eur" in body["usage"]
    run = await Run.objects.aget(pk=body["run_id"])
    assert run.status == "error"


async def test_an_answer_that_broke_off_is_an_error_after_the_deltas_already_streamed(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    # The text starts, then the connection is cut: what was shown cannot be taken back, nor tried again.
    provider.script(answer("Bimbamjob left two invoices unpaid and then", cut_after=4))
    stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True)
    text, run_id = "", None
    with pytest.raises(openai.APIError) as raised:
        async for chunk in stream:
            run_id = run_id or (chunk.model_extra or {}).get("run_id")
            text += "".join(c.delta.content or "" for c in chunk.choices)
    e = raised.value
    assert not isinstance(e, openai.APIStatusError)  # the stream answered 200: the error came in it
    assert e.code == "upstream_incomplete" and text.startswith("Bimbamjob left")
    body = e.body
    assert isinstance(body, dict) and body["run_id"] == run_id and body["status"] == "error"
    assert body["answer"] == text  # the text sent before it failed, as saved
    assert body["usage"]["completion_tokens"] > 0  # billed as cut


async def test_a_failure_streamed_before_any_text_is_an_error_event_too(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    provider.script(*[error_reply("openai", 401, "bad key")] * 2)
    stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True)
    first = await stream.__anext__()
    assert (first.model_extra or {})["run_id"]
    with pytest.raises(openai.APIError) as raised:
        async for _chunk in stream:
            pass
    assert raised.value.code == "upstream_auth" and "refused the API key" in raised.value.message


async def test_an_answer_is_still_an_answer(client: openai.AsyncOpenAI, provider: WireServer) -> None:
    provider.script(answer("Two invoices are unpaid.", usage=Usage(50, 6)))
    completion = await client.chat.completions.create(model=MODEL, messages=QUESTION)
    assert completion.choices[0].message.content == "Two invoices are unpaid."
    assert completion.choices[0].finish_reason == "stop"
    assert (completion.model_extra or {})["status"] == "ok"


@pytest.mark.parametrize(
    ("cause", "status", "code"),
    [
        (Cause(code="model_error", kind="server_error"), 502, "upstream_error"),
        (Cause(code="model_error", kind="unreachable"), 502, "upstream_error"),
        (Cause(code="model_error", kind="timeout"), 504, "upstream_timeout"),
        (Cause(code="model_error", kind="rate_limited"), 429, "upstream_rate_limited"),
        (Cause(code="model_error", kind="bad_request"), 502, "upstream_rejected"),
        (Cause(code="model_error", kind="authentication"), 502, "upstream_auth"),
        (Cause(code="model_error", kind="broken_stream"), 502, "upstream_incomplete"),
        (Cause(code="tool_failed", kind="KeyError"), 500, "internal_error"),
        (Cause(code="unexpected"), 500, "internal_error"),
        (None, 500, "internal_error"),
    ],
)
def test_each_way_a_run_fails_has_its_status_and_code(cause: Cause | None, status: int, code: str) -> None:
    error = run_failure(cause, "it failed", 12.2 if code == "upstream_rate_limited" else None, run_id="r")
    assert (error.status, error.code, error.extra["run_id"]) == (status, code, "r")
    assert error.retry == (status == 429)
    if status == 429:
        assert error.extra["retry_after"] == "13"  # the provider's delay, rounded up


# OpenAI's codes where OpenAI has one ---------------------------------------------------------------------------------


async def test_a_prompt_over_the_window_is_refused_with_openais_code_and_sentence(
    client: openai.AsyncOpenAI, provider: WireServer, settings: Settings
) -> None:
    settings.CHAT_MAX_MESSAGE_CHARS = 2_000_000  # the window's check, not the message's length
    question = "Bimbamjob invoices and payments. " * 20_000  # about 165,000 tokens; gpt-4o-mini has 128,000
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}])
    e = raised.value
    assert e.code == "context_length_exceeded" and e.param == "messages"
    found = re.search(
        r"maximum context length is (\d+) tokens\. However, your messages resulted in (\d+) tokens", e.message
    )
    assert found is not None and int(found[1]) == 128_000 and int(found[2]) > 128_000
    assert provider.requests == [] and not await Run.objects.aexists()


async def test_a_question_over_the_message_limit_is_refused_before_anything_else(
    client: openai.AsyncOpenAI, provider: WireServer, settings: Settings
) -> None:
    settings.CHAT_MAX_MESSAGE_CHARS = 100
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(
            model="no-such-model",
            messages=[*QUESTION, {"role": "assistant", "content": "?"}, {"role": "user", "content": "x" * 101}],
        )
    e = raised.value
    assert e.code == "string_above_max_length" and e.param == "messages[2].content"
    assert "maximum length 100, but got a string with length 101" in e.message
    assert provider.requests == [] and not await Run.objects.aexists()


async def test_every_response_carries_a_request_id_that_the_logs_name(
    client: openai.AsyncOpenAI, provider: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    provider.script(answer("Two invoices are unpaid."))
    caplog.set_level(logging.INFO)
    raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=QUESTION)
    rid = raw.headers["x-request-id"]
    assert re.fullmatch(r"req_[0-9a-f]{32}", rid)
    run_id = (raw.parse().model_extra or {})["run_id"]
    assert f"run {run_id} for request {rid}" in caplog.text
    assert f"POST /v1/chat/completions 200 request {rid}" in caplog.text
    with pytest.raises(openai.NotFoundError) as raised:
        await client.models.retrieve("no-such-model")
    other = raised.value.response.headers["x-request-id"]
    assert other != rid and raised.value.request_id == other  # the SDK's own attribute reads it


async def test_models_say_when_they_were_added_to_the_catalogue(client: openai.AsyncOpenAI) -> None:
    models = {m.id: m for m in (await client.models.list()).data}
    entry = await CatalogueEntry.objects.aget(model_id=MODEL)
    assert models[MODEL].created == int(entry.created.timestamp())
    assert all(m.created > 1_700_000_000 for m in models.values())


# Formats and sampling ------------------------------------------------------------------------------------------------

INVOICES_SCHEMA = {
    "type": "object",
    "properties": {"unpaid": {"type": "array", "items": {"type": "string"}}},
    "required": ["unpaid"],
    "additionalProperties": False,
}
SAMPLING: dict[str, Any] = {
    "temperature": 0.2,
    "top_p": 0.9,
    "stop": ["END"],
    "seed": 7,
    "presence_penalty": 0.1,
    "frequency_penalty": 0.3,
    "user": "client-42",
}


async def test_format_cap_and_sampling_reach_every_main_call_and_shape_the_answer(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    provider.script(
        sse_reply("openai", MODEL, Turn(calls=(("kb_search", '{"query": "unpaid", "kb": "factures"}'),))),
        answer('{"unpaid": ["F-2024-077"]}'),
    )
    fmt: Any = {"type": "json_schema", "json_schema": {"name": "invoices", "schema": INVOICES_SCHEMA, "strict": True}}
    completion = await client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        response_format=fmt,
        max_completion_tokens=300,
        extra_body={"tools_enabled": ["kb:factures"]},
        **SAMPLING,
    )
    assert json.loads(completion.choices[0].message.content or "") == {"unpaid": ["F-2024-077"]}
    assert (completion.model_extra or {})["warnings"] == []
    assert len(provider.requests) == 2  # a round with a search, then the answer
    for sent in (r.body for r in provider.requests):
        assert sent["response_format"] == fmt and sent["max_tokens"] == 300
        assert {k: sent[k] for k in SAMPLING} == SAMPLING


async def test_an_answer_cut_by_max_tokens_ends_with_length(client: openai.AsyncOpenAI, provider: WireServer) -> None:
    provider.script(sse_reply("openai", MODEL, Turn("Bimbamjob left two", finish="length")))
    stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=3, stream=True)
    finishes = [c.finish_reason async for chunk in stream for c in chunk.choices if c.finish_reason]
    assert finishes == ["length"] and provider.requests[0].body["max_tokens"] == 3


async def test_a_reasoning_model_is_not_sent_what_it_refuses_and_the_response_says_so(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    # gpt-5 goes through the Responses API, which takes no stop, seed nor penalties; a reasoning model no sampling.
    provider.script(sse_reply("responses", "gpt-5", Turn("Two.")))
    completion = await client.chat.completions.create(model="gpt-5", messages=QUESTION, **SAMPLING)
    assert completion.choices[0].message.content == "Two."
    warnings = (completion.model_extra or {})["warnings"]
    refused = ["temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty"]
    assert [(w["code"], w["param"]) for w in warnings] == [("parameter_not_sent", p) for p in refused]
    sent = provider.requests[0].body
    assert provider.requests[0].path == "/v1/responses"
    assert not set(refused) & set(sent) and sent["user"] == "client-42"


async def test_more_than_one_choice_is_refused(client: openai.AsyncOpenAI, provider: WireServer) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model=MODEL, messages=QUESTION, n=2)
    assert raised.value.code == "invalid_body" and raised.value.param == "n"
    assert provider.requests == []


async def test_langchain_structured_output_gets_its_object(secret: str, provider: WireServer) -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    class Invoices(BaseModel):
        unpaid: list[str]

    provider.script(answer('{"unpaid": ["F-2024-077", "F-2024-091"]}'))
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=application), base_url="http://testserver", timeout=30)
    chat = ChatOpenAI(
        model=MODEL, base_url="http://testserver/v1", api_key=secret, http_async_client=http, max_retries=0
    )
    found = await chat.with_structured_output(Invoices).ainvoke("Which invoices of Bimbamjob are unpaid?")
    assert found == Invoices(unpaid=["F-2024-077", "F-2024-091"])
    sent = provider.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Invoices"
    await http.aclose()
    await snapshot.aclose_providers()


# Live per-agent figures ----------------------------------------------------------------------------------------------


async def test_a_running_agents_cost_and_tokens_show_live_in_the_run_and_the_stream(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    task = {"instruction": "Find the unpaid invoices of Bimbamjob.", "model": MODEL, "resources": ["kb:factures"]}
    provider.script(
        sse_reply("openai", "gpt-4.1", Turn(calls=(("agents", json.dumps({"tasks": [task]})),))),
        sse_reply(
            "openai", MODEL, Turn(calls=(("kb_search", '{"query": "unpaid", "kb": "factures"}'),), usage=Usage(900, 40))
        ),
        sse_reply("openai", MODEL, Turn("Still reading"), hang_after=1),  # the agent's next call hangs
    )
    events: list[dict[str, Any]] = []

    async def follow() -> None:
        stream = await client.chat.completions.create(
            model="gpt-4.1",
            messages=QUESTION,
            stream=True,
            extra_body={"tools_enabled": ["kb:factures", "agents"], "reasoning_level": "approfondi"},
        )
        async for chunk in stream:
            extra = chunk.model_extra or {}
            if "event" in extra:
                events.append(extra["event"])
            elif "run_id" in extra and not events:
                events.append({"type": "start", "run_id": extra["run_id"]})

    following = asyncio.create_task(follow())
    await asyncio.to_thread(provider.hanging.wait, 30)
    run = await Run.objects.filter(status="running").aget()
    for _ in range(100):  # its steps are written a little after they happen (the recorder's batches)
        live = (await client.get(f"/runs/{run.pk}", cast_to=httpx2.Response)).json()
        agent = next((s["agent"] for s in live["steps"] if s["type"] == "run_agent"), {"cost_eur": 0})
        if agent["cost_eur"] > 0:
            break
        await asyncio.sleep(0.05)
    assert live["status"] == "running" and agent["status"] == "running" and agent["cost_eur"] > 0
    assert agent["usage"]["prompt_tokens"] == 900 and agent["usage"]["completion_tokens"] == 40
    await client.post(f"/runs/{run.pk}/cancel", cast_to=httpx2.Response)
    await asyncio.wait_for(following, 30)
    kinds = [e["type"] for e in events]
    assert kinds.index("agent_usage") < kinds.index("agent_finished")
    spent = next(e for e in events if e["type"] == "agent_usage")
    assert spent["agent_id"] == agent["id"] and spent["cost_eur"] == agent["cost_eur"]
    assert spent["usage"]["prompt_tokens"] == 900


# The OpenAPI document ------------------------------------------------------------------------------------------------


async def test_the_openapi_document_describes_the_stream_and_the_failed_runs(client: openai.AsyncOpenAI) -> None:
    document = (await client.get("/openapi.json", cast_to=httpx2.Response)).json()
    schemas = document["components"]["schemas"]
    responses = document["paths"]["/v1/chat/completions"]["post"]["responses"]
    chunk = responses["200"]["content"]["text/event-stream"]["schema"]["$ref"]
    assert chunk == "#/components/schemas/ChatCompletionChunk"
    for status in ("500", "502", "504"):
        assert responses[status]["content"]["application/json"]["schema"]["$ref"].endswith("/RunErrorOut")
    assert {"run_id", "steps", "usage", "answer"} <= set(schemas["RunErrorBody"]["properties"])
    assert {"choices", "event", "run_id", "usage", "status"} <= set(schemas["ChatCompletionChunk"]["properties"])
    assert "agent_usage" in schemas["StreamEvent"]["properties"]["type"]["enum"]

    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield from [value] if key == "$ref" else refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    assert {r.rsplit("/", 1)[1] for r in refs(document)} <= set(schemas)  # every reference resolves
