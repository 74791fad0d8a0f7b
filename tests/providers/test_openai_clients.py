"""The API as clients written for OpenAI see it, with a provider behind it: the official ``openai`` SDK (and
langchain-openai) against the ASGI app, whose models are served by the tests' wire server (the only fake: the
provider). A run that fails is an error to them, with OpenAI's statuses and the run's figures in it; a stopped run
is an answer."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import openai
import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageFunctionToolCall
from pydantic import SecretStr
from pytest_django.fixtures import Settings

from assistant.api.errors import run_failure
from assistant.catalogue import snapshot
from assistant.catalogue.models import CatalogueEntry
from assistant.engine.causes import Cause
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs.models import Run
from tests.asgi_app import asgi_transport
from tests.providers.wire import Reply, Turn, Usage, WireServer, error_reply, sse_reply

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
    http = httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=30)
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
    http = httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=30)
    chat = ChatOpenAI(
        model=MODEL, base_url="http://testserver/v1", api_key=SecretStr(secret), http_async_client=http, max_retries=0
    )
    found = await chat.with_structured_output(Invoices).ainvoke("Which invoices of Bimbamjob are unpaid?")
    assert found == Invoices(unpaid=["F-2024-077", "F-2024-091"])
    sent = provider.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Invoices"
    await http.aclose()
    await snapshot.aclose_providers()


# Client tools --------------------------------------------------------------------------------------------------------

REMINDER: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "send_reminder",
        "description": "Send a payment reminder for an invoice.",
        "parameters": {"type": "object", "properties": {"invoice": {"type": "string"}}, "required": ["invoice"]},
    },
}
REMIND = ("send_reminder", '{"invoice": "F-2024-077"}')
SEARCH = ("kb_search", '{"query": "unpaid", "kb": "factures"}')


def calling(*calls: tuple[str, str], text: str = "", model: str = MODEL, usage: Usage = USAGE) -> Reply:
    """The model's round that calls ``calls`` (name, JSON arguments); the wire server's ids are ``call0000N``."""
    return sse_reply("openai", model, Turn(text, calls=calls, usage=usage))


def names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def answered(message: Any, result: str) -> list[Any]:
    """The assistant message the client got, then its tool's result, as a client sends them back."""
    calls = [c.model_dump(mode="json") for c in message.tool_calls]
    return [
        {"role": "assistant", "content": message.content, "tool_calls": calls},
        *[{"role": "tool", "tool_call_id": c["id"], "content": result} for c in calls],
    ]


async def test_a_client_tool_loop_runs_to_completion_with_the_sdk(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    provider.script(
        calling(REMIND, usage=Usage(300, 12)), answer("The reminder for F-2024-077 is sent.", Usage(340, 9))
    )
    extensions = {"tools_enabled": ["kb:factures"]}
    first = await client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=[REMINDER],
        tool_choice="required",
        parallel_tool_calls=False,
        extra_body=extensions,
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    run_id = (first.model_extra or {})["run_id"]
    assert call.id == f"call_{uuid.UUID(run_id).hex}00" and call.type == "function"
    assert (call.function.name, call.function.arguments) == REMIND
    # Billed as any round: the usage the provider reported.
    assert first.usage is not None and (first.usage.prompt_tokens, first.usage.completion_tokens) == (300, 12)
    assert (first.model_extra or {})["status"] == "ok" and (await Run.objects.aget(pk=run_id)).cost_eur > 0
    kept = (await client.get(f"/runs/{run_id}", cast_to=httpx2.Response)).json()  # a background run's client reads them
    assert kept["tool_calls"] == [call.model_dump(mode="json")]
    sent = provider.requests[0].body
    assert {"kb_search", "kb_read"} < set(names(sent)) and names(sent)[-1] == "send_reminder"  # beside the server's
    assert sent["tool_choice"] == "required" and sent["parallel_tool_calls"] is False

    follow_up = [*QUESTION, *answered(choice.message, '{"sent": true}')]
    done = await client.chat.completions.create(
        model=MODEL, messages=follow_up, tools=[REMINDER], extra_body=extensions
    )
    assert done.choices[0].message.content == "The reminder for F-2024-077 is sent."
    assert done.choices[0].finish_reason == "stop" and done.choices[0].message.tool_calls is None
    assert done.usage is not None and (done.usage.prompt_tokens, done.usage.completion_tokens) == (340, 9)
    again = provider.requests[1].body
    # The run's own messages go on, prefix unchanged: the model's call under its own id, then the client's result.
    before = sent["messages"]
    assert again["messages"][: len(before)] == before
    assert again["messages"][len(before) :] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call00000", "type": "function", "function": {"name": REMIND[0], "arguments": REMIND[1]}}
            ],
        },
        {"role": "tool", "content": '{"sent": true}', "tool_call_id": "call00000"},
    ]
    assert again["tool_choice"] == "auto" and "send_reminder" in names(again)


async def test_a_loop_of_several_client_rounds_keeps_one_growing_prompt(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    second = ("send_reminder", '{"invoice": "F-2024-091"}')
    provider.script(calling(SEARCH, REMIND), calling(second), answer("Both reminders are sent."))
    messages: list[Any] = list(QUESTION)
    extensions = {"tools_enabled": ["kb:factures"]}
    while True:
        completion = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=[REMINDER], extra_body=extensions
        )
        if completion.choices[0].finish_reason != "tool_calls":
            break
        messages += answered(completion.choices[0].message, "sent")
    assert completion.choices[0].message.content == "Both reminders are sent."
    sent = [r.body["messages"] for r in provider.requests]
    assert len(sent) == 3 and sent[2][: len(sent[1])] == sent[1] and sent[1][: len(sent[0])] == sent[0]
    # The first round's search and what it found go on to the last call, which the client never saw.
    assert [m.get("tool_call_id") for m in sent[2] if m["role"] == "tool"] == ["call00000", "call00001", "call00000"]


async def test_a_tools_strict_is_said_not_sent(client: openai.AsyncOpenAI, provider: WireServer) -> None:
    provider.script(answer("Nothing to remind."))
    strict: ChatCompletionFunctionToolParam = {
        **REMINDER,
        "function": {**REMINDER["function"], "name": "send_final_notice", "strict": True},
    }
    completion = await client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[REMINDER, strict])
    warnings = (completion.model_extra or {})["warnings"]
    assert [(w["code"], w["param"]) for w in warnings] == [("parameter_not_sent", "tools[1].function.strict")]
    assert "strict" not in json.dumps(provider.requests[0].body["tools"])


async def test_a_reasoning_models_reasoning_goes_on_into_the_follow_up(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    # gpt-5 goes through the Responses API: its encrypted reasoning item is kept with the run that ended on the
    # client's call, and sent back in its place, before that call, by the run that continues it.
    provider.script(
        sse_reply("responses", "gpt-5", Turn(thinking="F-2024-077 is unpaid: remind it.", calls=(REMIND,))),
        sse_reply("responses", "gpt-5", Turn("The reminder is sent.")),
    )
    extensions = {"reasoning_level": "standard"}
    first = await client.chat.completions.create(
        model="gpt-5", messages=QUESTION, tools=[REMINDER], extra_body=extensions
    )
    assert first.choices[0].finish_reason == "tool_calls"
    done = await client.chat.completions.create(
        model="gpt-5",
        messages=[*QUESTION, *answered(first.choices[0].message, "sent")],
        tools=[REMINDER],
        extra_body=extensions,
    )
    assert done.choices[0].message.content == "The reminder is sent."
    issued = [e["item"] for e in provider.replies[0].events if e.get("type") == "response.output_item.done"]
    sent = [
        i
        for i in provider.requests[1].body["input"]
        if i.get("type") in ("reasoning", "function_call", "function_call_output")
    ]
    assert [i["type"] for i in sent] == ["reasoning", "function_call", "function_call_output"]
    assert sent[0]["id"] == issued[0]["id"] and sent[0]["encrypted_content"] == issued[0]["encrypted_content"]
    assert sent[1]["call_id"] == sent[2]["call_id"] == issued[1]["call_id"] and sent[2]["output"] == "sent"


async def test_a_streamed_turn_ends_with_tool_call_deltas(client: openai.AsyncOpenAI, provider: WireServer) -> None:
    provider.script(calling(REMIND, text="I send it."), answer("Sent."))
    stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[REMINDER], stream=True)
    text, calls, finishes = "", [], []
    async for chunk in stream:
        for c in chunk.choices:
            text += c.delta.content or ""
            calls += c.delta.tool_calls or []
            finishes += [c.finish_reason] if c.finish_reason else []
    assert text == "I send it." and finishes == ["tool_calls"]
    [call] = calls
    assert call.index == 0 and call.id and call.id.startswith("call_") and call.type == "function"
    assert call.function is not None and (call.function.name, call.function.arguments) == REMIND
    message: Any = {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"id": call.id, "type": "function", "function": {"name": REMIND[0], "arguments": REMIND[1]}}],
    }
    follow_up = [*QUESTION, message, {"role": "tool", "tool_call_id": call.id, "content": "sent"}]
    stream = await client.chat.completions.create(model=MODEL, messages=follow_up, tools=[REMINDER], stream=True)
    answer_text = "".join([c.delta.content or "" async for chunk in stream for c in chunk.choices])
    assert answer_text == "Sent."
    assert provider.requests[1].body["messages"][-2]["content"] == "I send it."


async def test_the_servers_tools_of_the_same_round_run_and_only_the_clients_go_back(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    provider.script(calling(SEARCH, REMIND), answer("Reminded; F-2024-077 was unpaid."))
    extensions = {"tools_enabled": ["kb:factures"]}
    first = await client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=[REMINDER], extra_body=extensions
    )
    message = first.choices[0].message
    names = [
        c.function.name if isinstance(c, ChatCompletionMessageFunctionToolCall) else c.type
        for c in message.tool_calls or []
    ]
    assert names == ["send_reminder"]
    steps = (first.model_extra or {})["steps"]
    assert [(s["type"], s["tool"], s["ok"]) for s in steps] == [("tool_call", "kb_search", True)]
    await client.chat.completions.create(
        model=MODEL, messages=[*QUESTION, *answered(message, "sent")], tools=[REMINDER], extra_body=extensions
    )
    sent = provider.requests[1].body["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "tool"]
    assert [c["id"] for c in sent[-3]["tool_calls"]] == ["call00000", "call00001"]
    search, reminder = sent[-2], sent[-1]
    assert search["tool_call_id"] == "call00000" and json.loads(search["content"])["kb"] == "factures"  # what it found
    assert reminder == {"role": "tool", "content": "sent", "tool_call_id": "call00001"}


async def test_a_follow_up_with_another_organisations_ids_is_taken_as_sent(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    provider.script(calling(SEARCH, REMIND), answer("Other's answer."))
    first = await client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=[REMINDER], extra_body={"tools_enabled": ["kb:factures"]}
    )
    message = first.choices[0].message
    other = await Organisation.objects.acreate(name="Other Company", slug="other")
    secret = (await sync_to_async(keys.create_key)(other, "theirs"))[1]
    http = httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=30)
    async with openai.AsyncOpenAI(base_url="http://testserver/v1", api_key=secret, http_client=http) as theirs:
        await theirs.chat.completions.create(
            model=MODEL, messages=[*QUESTION, *answered(message, "sent")], tools=[REMINDER]
        )
    sent = provider.requests[1].body["messages"]
    ours = (message.tool_calls or [])[0].id
    # What the client sent, nothing of the demo organisation's run (its search and what it found).
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == ours and sent[3] == {
        "role": "tool",
        "content": "sent",
        "tool_call_id": ours,
    }
    assert "factures" not in json.dumps(sent)


@pytest.fixture
def mistral(settings: Settings) -> Iterator[WireServer]:
    """The Mistral wire server (which refuses what Mistral's API refuses) as the app's only provider."""
    server = WireServer("mistral").start()
    settings.DEMO_PACE = settings.DEMO_LATENCY = 0.0
    settings.MISTRAL_API_KEY, settings.MISTRAL_BASE_URL = "test-key", server.url
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "", None
    snapshot.forget_catalogue()
    yield server
    snapshot.forget_catalogue()
    server.stop()


MISTRAL_ID = re.compile(r"^[A-Za-z0-9]{9}$")


async def test_a_mistral_model_is_sent_mistral_ids_whatever_ids_the_client_has(mistral: WireServer) -> None:
    await sync_to_async(call_command)("load_catalogue", verbosity=0)
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    secret = (await sync_to_async(keys.create_key)(org, "clients"))[1]
    model = "mistral-small"
    mistral.script(
        sse_reply("mistral", model, Turn(calls=(REMIND,))),
        sse_reply("mistral", model, Turn("Sent.")),
        sse_reply("mistral", model, Turn("Sent again.")),
    )
    http = httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=30)
    async with openai.AsyncOpenAI(base_url="http://testserver/v1", api_key=secret, http_client=http) as client:
        first = await client.chat.completions.create(model=model, messages=QUESTION, tools=[REMINDER])
        ours = (first.choices[0].message.tool_calls or [])[0].id
        assert not MISTRAL_ID.match(ours)  # OpenAI's shape, for the client
        follow_up = [*QUESTION, *answered(first.choices[0].message, "sent")]
        done = await client.chat.completions.create(model=model, messages=follow_up, tools=[REMINDER])
        assert done.choices[0].message.content == "Sent."
        # A conversation whose ids are no run's (an edited one, another server's): taken as sent, ids mapped.
        edited = json.loads(json.dumps(follow_up).replace(ours, "call_from_elsewhere_0001"))
        again = await client.chat.completions.create(model=model, messages=edited, tools=[REMINDER])
        assert again.choices[0].message.content == "Sent again."
    await snapshot.aclose_providers()
    continued, as_sent = (r.body["messages"] for r in mistral.requests[1:])
    assert continued[-2]["tool_calls"][0]["id"] == continued[-1]["tool_call_id"] == "call00000"  # the model's own
    mapped = as_sent[-2]["tool_calls"][0]["id"]
    assert MISTRAL_ID.match(mapped) and as_sent[-1]["tool_call_id"] == mapped


async def test_tool_choice_binds_the_first_call_only(client: openai.AsyncOpenAI, provider: WireServer) -> None:
    provider.script(calling(SEARCH), answer("F-2024-077 is unpaid."))
    completion = await client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=[REMINDER],
        tool_choice={"type": "function", "function": {"name": "send_reminder"}},
        extra_body={"tools_enabled": ["kb:factures"]},
    )
    assert completion.choices[0].finish_reason == "stop"  # the model chose the server's search: it ran
    chosen = [r.body["tool_choice"] for r in provider.requests]
    assert chosen == [{"type": "function", "function": {"name": "send_reminder"}}, "auto"]


async def test_agents_never_receive_the_clients_tools(client: openai.AsyncOpenAI, provider: WireServer) -> None:
    task = {"instruction": "Find the unpaid invoices of Bimbamjob.", "model": MODEL, "resources": ["kb:factures"]}
    report = {"findings": "F-2024-077 is unpaid [fac-1].", "sources": ["fac-1"], "gaps": []}
    provider.script(
        calling(("agents", json.dumps({"tasks": [task]})), model="gpt-4.1"),
        calling(("submit_result", json.dumps(report))),  # the agent
        calling(REMIND, model="gpt-4.1"),
    )
    completion = await client.chat.completions.create(
        model="gpt-4.1",
        messages=QUESTION,
        tools=[REMINDER],
        extra_body={"tools_enabled": ["kb:factures", "agents"], "reasoning_level": "approfondi"},
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    main, agent, main_again = (names(r.body) for r in provider.requests)
    assert "send_reminder" in main and "send_reminder" in main_again
    assert "send_reminder" not in agent and "submit_result" in agent


@pytest.mark.parametrize(
    ("tools", "choice", "param"),
    [
        ([{"type": "function", "function": {"name": "kb_search"}}], None, "tools[0].function.name"),
        ([REMINDER, {"type": "function", "function": {"name": "agents"}}], None, "tools[1].function.name"),
        ([{"type": "function", "function": {"name": "mcp_crm__lookup"}}], None, "tools[0].function.name"),
        ([REMINDER, REMINDER], None, "tools"),
        ([REMINDER], {"type": "function", "function": {"name": "kb_read"}}, "tool_choice"),
        (None, "required", "tool_choice"),
    ],
)
async def test_a_client_tool_named_as_a_server_tool_is_refused(
    client: openai.AsyncOpenAI, provider: WireServer, tools: Any, choice: Any, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(
            model=MODEL, messages=QUESTION, tools=tools or openai.omit, tool_choice=choice or openai.omit
        )
    assert raised.value.code == "invalid_body" and raised.value.param == param
    assert provider.requests == [] and not await Run.objects.aexists()


async def test_a_result_for_no_call_or_a_call_without_its_result_is_refused(
    client: openai.AsyncOpenAI, provider: WireServer
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "send_reminder", "arguments": "{}"}}
    unanswered: Any = [*QUESTION, {"role": "assistant", "tool_calls": [call]}, *QUESTION]
    stray: Any = [*QUESTION, {"role": "tool", "tool_call_id": "call_1", "content": "sent"}]
    for messages in (unanswered, stray):
        with pytest.raises(openai.BadRequestError) as raised:
            await client.chat.completions.create(model=MODEL, messages=messages, tools=[REMINDER])
        assert raised.value.code == "invalid_body" and raised.value.param == "messages"
    assert provider.requests == []


async def test_langchain_bind_tools_and_structured_output_through_a_tool(secret: str, provider: WireServer) -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    class Invoices(BaseModel):
        """The unpaid invoices."""

        unpaid: list[str]

    def send_reminder(invoice: str) -> str:
        """Send a payment reminder for an invoice."""
        return "sent"

    provider.script(calling(REMIND), calling(("Invoices", '{"unpaid": ["F-2024-077", "F-2024-091"]}')), calling(REMIND))
    http = httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=30)
    chat = ChatOpenAI(
        model=MODEL, base_url="http://testserver/v1", api_key=SecretStr(secret), http_async_client=http, max_retries=0
    )
    message = await chat.bind_tools([send_reminder]).ainvoke("Remind Bimbamjob of F-2024-077.")
    [call] = message.tool_calls
    assert call["name"] == "send_reminder" and call["args"] == {"invoice": "F-2024-077"}
    assert call["id"] and call["id"].startswith("call_")
    found = await chat.with_structured_output(Invoices, method="function_calling").ainvoke(
        "Which invoices of Bimbamjob are unpaid?"
    )
    assert found == Invoices(unpaid=["F-2024-077", "F-2024-091"])
    sent = provider.requests[1].body
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "Invoices"}}
    assert names(sent)[-1] == "Invoices"
    chunks = [c async for c in chat.bind_tools([send_reminder]).astream("Remind Bimbamjob of F-2024-077.")]
    streamed = chunks[0]
    for chunk in chunks[1:]:
        streamed += chunk  # type: ignore[assignment]  # AIMessageChunk's sum: how langchain gathers a stream
    [call] = streamed.tool_calls
    assert call["name"] == "send_reminder" and call["args"] == {"invoice": "F-2024-077"}
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
        agent: dict[str, Any] = next((s["agent"] for s in live["steps"] if s["type"] == "run_agent"), {"cost_eur": 0})
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
    request = schemas["ChatCompletionRequest"]["properties"]
    assert {"tools", "tool_choice", "parallel_tool_calls"} <= set(request)
    assert (
        "tool_calls" in schemas["ChunkDelta"]["properties"] and "tool_calls" in schemas["OutputMessage"]["properties"]
    )

    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield from [value] if key == "$ref" else refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    assert {r.rsplit("/", 1)[1] for r in refs(document)} <= set(schemas)  # every reference resolves
