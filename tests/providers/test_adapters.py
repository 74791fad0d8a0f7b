"""Each adapter runs its real SDK against a local server speaking its provider's wire protocol."""

from __future__ import annotations

import json
import time

import pytest

from assistant.engine.catalogue import ModelInfo
from assistant.engine.errors import (
    AuthenticationFailed,
    BadModelRequest,
    MalformedResponse,
    ModelUnavailable,
    RateLimited,
)
from assistant.engine.models.base import Model
from assistant.engine.models.openai import OpenAIModel
from assistant.engine.providers.openai import OpenAIProvider
from assistant.engine.types import (
    FinishPart,
    Message,
    ModelRequest,
    ModelResponse,
    NamedTool,
    ResponseModel,
    Sampling,
    TextDelta,
    ToolCall,
    ToolCallPart,
    ToolSpec,
    UsagePart,
)
from tests.providers.provider_support import PLAIN, Wire, make_provider
from tests.providers.wire import Reply, Turn, Usage, error_reply, sse_reply

pytestmark = pytest.mark.parametrize("server", ["openai", "mistral"], indirect=True)

REASONER = ModelInfo(
    id="reasoner",
    provider="test",
    display_name="Reasoner",
    input_price=1.0,
    cached_input_price=0.1,
    output_price=8.0,
    context_window=128_000,
    output_cap=16_000,
    reasoning_efforts=("minimal", "low", "medium", "high"),
)
SEARCH = ToolSpec("kb_search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}}})
READ = ToolSpec("kb_read", "Read.", {"type": "object", "properties": {"ids": {"type": "array"}}})
HELLO = (Message.system("You are terse."), Message.user("Say hello."))


async def collect(model: Model, request: ModelRequest) -> tuple[ModelResponse, list[object]]:
    response = ModelResponse()
    parts: list[object] = []
    async for part in model.stream(request):
        parts.append(part)
        response.add(part)
    return response, parts


async def test_text_streams_in_deltas_then_usage_with_cached_and_reasoning_tokens(wire: Wire) -> None:
    model = wire.model(PLAIN, api_model="plain-2024")
    wire.server.script(sse_reply(wire.dialect, "plain-2024", Turn("Hello there, friend.", usage=Usage(120, 9, 64, 3))))

    response, parts = await collect(model, ModelRequest(messages=HELLO, max_output_tokens=300))

    assert [p.text for p in parts if isinstance(p, TextDelta)] == ["Hello", " there,", " friend."]
    assert parts[-3:] == [
        ResponseModel("plain-2024"),  # the model the provider says answered
        UsagePart(120, 9, cached_prompt_tokens=64, reasoning_tokens=3),
        FinishPart("stop"),
    ]
    assert response.text == "Hello there, friend." and response.model == "plain-2024"
    body = wire.server.requests[0].body
    assert body["model"] == "plain-2024" and body["stream"] is True
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("system", "You are terse."),
        ("user", "Say hello."),
    ]
    assert "tools" not in body and "tool_choice" not in body and "parallel_tool_calls" not in body
    assert "reasoning_effort" not in body
    if wire.dialect == "openai":
        assert body["stream_options"] == {"include_usage": True}
        assert body["max_tokens"] == 300  # a compatible server: OpenAI-only parameters are left out
        assert "max_completion_tokens" not in body and "prompt_cache_key" not in body
    else:
        assert body["max_tokens"] == 300
        assert len(body["prompt_cache_key"]) == 32
    recorded = wire.server.requests[0]
    assert recorded.path.endswith("/chat/completions")
    if wire.dialect == "openai":
        assert recorded.headers["authorization"] == "Bearer sk-test"
        assert recorded.headers["content-type"] == "application/json"


async def test_tool_call_deltas_split_across_chunks_make_several_complete_calls(wire: Wire) -> None:
    model = wire.model(PLAIN)
    calls = (("kb_search", '{"query": "Bimbamjob invoices 2024"}'), ("kb_read", '{"ids": ["doc-1", "doc-2"]}'))
    wire.server.script(sse_reply(wire.dialect, "plain", Turn("Looking.", calls, Usage(300, 40)), piece=5))

    response, parts = await collect(
        model, ModelRequest(messages=HELLO, tools=(SEARCH, READ), tool_choice="required", parallel_tool_calls=False)
    )

    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("kb_search", {"query": "Bimbamjob invoices 2024"}),
        ("kb_read", {"ids": ["doc-1", "doc-2"]}),
    ]
    assert len({c.id for c in response.tool_calls}) == 2
    assert response.finish_reason == "tool_calls"
    # Tool calls come whole, after the text (and the model that answered) and before the usage.
    kinds = [type(p).__name__ for p in parts]
    assert kinds == ["TextDelta", "ResponseModel", "ToolCallPart", "ToolCallPart", "UsagePart", "FinishPart"]
    body = wire.server.requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == ["kb_search", "kb_read"]
    assert body["tool_choice"] == ("required" if wire.dialect == "openai" else "any")
    assert body["parallel_tool_calls"] is False


@pytest.mark.parametrize(
    ("choice", "openai_wire", "mistral_wire"),
    [
        ("auto", "auto", "auto"),
        ("none", "none", "none"),
        (
            NamedTool("kb_read"),
            {"type": "function", "function": {"name": "kb_read"}},
            {"type": "function", "function": {"name": "kb_read"}},
        ),
    ],
)
async def test_tool_choice_reaches_the_wire(
    wire: Wire, choice: object, openai_wire: object, mistral_wire: object
) -> None:
    model = wire.model(PLAIN)
    wire.server.script(sse_reply(wire.dialect, "plain", Turn("ok")))
    await collect(model, ModelRequest(messages=HELLO, tools=(SEARCH, READ), tool_choice=choice))  # type: ignore[arg-type]  # each form a tool choice takes, parametrized as object
    assert wire.server.requests[0].body["tool_choice"] == (openai_wire if wire.dialect == "openai" else mistral_wire)


async def test_history_with_tool_calls_and_results_maps_to_the_wire(wire: Wire) -> None:
    model = wire.model(PLAIN)
    call = ToolCall("abc123def", "kb_search", '{"query": "x"}')
    messages = (*HELLO, Message.assistant("Searching.", (call,)), Message.tool(call, '{"hits": []}'))
    wire.server.script(sse_reply(wire.dialect, "plain", Turn("Nothing found.")))
    await collect(model, ModelRequest(messages=messages, tools=(SEARCH,)))
    sent = wire.server.requests[0].body["messages"]
    assert sent[2]["role"] == "assistant" and sent[2]["content"] == "Searching."
    assert [{k: v for k, v in c.items() if k != "index"} for c in sent[2]["tool_calls"]] == [
        {"id": "abc123def", "type": "function", "function": {"name": "kb_search", "arguments": '{"query": "x"}'}}
    ]
    assert sent[3]["role"] == "tool" and sent[3]["tool_call_id"] == "abc123def" and sent[3]["content"] == '{"hits": []}'


async def test_reasoning_effort_goes_only_to_a_model_that_reasons(wire: Wire) -> None:
    plain, reasoner = wire.model(PLAIN), wire.model(REASONER)
    wire.server.script(sse_reply(wire.dialect, "plain", Turn("a")), sse_reply(wire.dialect, "reasoner", Turn("b")))
    await collect(plain, ModelRequest(messages=HELLO, reasoning_effort="high"))
    await collect(reasoner, ModelRequest(messages=HELLO, reasoning_effort="medium"))
    assert "reasoning_effort" not in wire.server.requests[0].body
    assert wire.server.requests[1].body["reasoning_effort"] == "medium"


async def test_rate_limit_is_retried_after_the_delay_the_server_asks(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(
        error_reply(wire.dialect, 429, "Too many requests", {"retry-after": "1"}),
        sse_reply(wire.dialect, "plain", Turn("Made it.")),
    )
    started = time.monotonic()
    response, _ = await collect(model, ModelRequest(messages=HELLO))
    assert response.text == "Made it."
    assert time.monotonic() - started >= 0.95
    assert len(wire.server.requests) == 2


async def test_rate_limit_asking_too_long_a_wait_goes_up_with_the_delay(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(error_reply(wire.dialect, 429, "Slow down", {"retry-after": "3600"}))
    with pytest.raises(RateLimited) as caught:
        await collect(model, ModelRequest(messages=HELLO))
    assert caught.value.retry_after == 3600 and "Slow down" in str(caught.value)
    assert len(wire.server.requests) == 1


async def test_server_error_is_retried_then_succeeds(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(error_reply(wire.dialect, 500, "boom"), sse_reply(wire.dialect, "plain", Turn("Fine now.")))
    response, _ = await collect(model, ModelRequest(messages=HELLO))
    assert response.text == "Fine now."
    assert len(wire.server.requests) == 2


async def test_server_errors_are_retried_a_bounded_number_of_times(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(*(error_reply(wire.dialect, 503, "overloaded") for _ in range(5)))
    with pytest.raises(ModelUnavailable) as caught:
        await collect(model, ModelRequest(messages=HELLO))
    assert "503" in str(caught.value) and "overloaded" in str(caught.value)
    assert len(wire.server.requests) == 3


async def test_authentication_failure_is_clear_and_not_retried(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(error_reply(wire.dialect, 401, "Invalid API key"))
    with pytest.raises(AuthenticationFailed) as caught:
        await collect(model, ModelRequest(messages=HELLO))
    assert "Invalid API key" in str(caught.value)
    assert ("OPENAI_API_KEY" if wire.dialect == "openai" else "MISTRAL_API_KEY") in str(caught.value)
    assert len(wire.server.requests) == 1


async def test_bad_request_is_clear_and_not_retried(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(error_reply(wire.dialect, 400, "Unknown model 'plain'"))
    with pytest.raises(BadModelRequest, match="Unknown model 'plain'"):
        await collect(model, ModelRequest(messages=HELLO))
    assert len(wire.server.requests) == 1


async def test_stream_cut_before_anything_was_shown_is_retried(wire: Wire) -> None:
    model = wire.model(PLAIN)
    calls = (("kb_search", '{"query": "a long enough query to be split"}'),)
    # Cut in the middle of the tool call's argument pieces: nothing had reached the caller yet.
    wire.server.script(
        sse_reply(wire.dialect, "plain", Turn(calls=calls), cut_after=3),
        sse_reply(wire.dialect, "plain", Turn(calls=calls)),
    )
    response, _ = await collect(model, ModelRequest(messages=HELLO, tools=(SEARCH,)))
    assert json.loads(response.tool_calls[0].arguments) == {"query": "a long enough query to be split"}
    assert len(wire.server.requests) == 2


async def test_stream_cut_after_text_was_shown_is_a_malformed_response(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(sse_reply(wire.dialect, "plain", Turn("One two three four five six."), cut_after=4))
    seen: list[str] = []
    with pytest.raises(MalformedResponse, match="broke off"):
        async for part in model.stream(ModelRequest(messages=HELLO)):
            if isinstance(part, TextDelta):
                seen.append(part.text)
    assert "".join(seen) == "One two three"
    assert len(wire.server.requests) == 1


async def test_stream_ending_without_a_finish_is_malformed(wire: Wire) -> None:
    model = wire.model(PLAIN)
    events = sse_reply(wire.dialect, "plain", Turn("Half")).events[:-2]  # no finish, no usage
    wire.server.script(*[type(r)(events=events) for r in [sse_reply(wire.dialect, "plain", Turn())] * 3])
    with pytest.raises(MalformedResponse):
        await collect(model, ModelRequest(messages=HELLO))


async def test_unreadable_chunk_is_malformed(wire: Wire) -> None:
    model = wire.model(PLAIN)
    broken = sse_reply(wire.dialect, "plain", Turn("x"))
    bad = type(broken)(events=("{not json",))
    wire.server.script(bad, bad, bad)
    with pytest.raises(MalformedResponse):
        await collect(model, ModelRequest(messages=HELLO))
    assert len(wire.server.requests) == 3


async def test_an_error_object_in_the_stream_is_the_server_failing_mid_answer(wire: Wire) -> None:
    if wire.dialect != "openai":
        pytest.skip("OpenAI's stream carries errors as an object in a chunk")
    model = wire.model(PLAIN)
    head = sse_reply("openai", "plain", Turn("Half an answer")).events[:2]
    broken = Reply(events=(*head, {"error": {"message": "the model overloaded", "type": "server_error"}}))
    wire.server.script(broken)
    with pytest.raises(MalformedResponse, match="the model overloaded"):
        await collect(model, ModelRequest(messages=HELLO))
    assert len(wire.server.requests) == 1  # text had been shown: not retried


async def test_a_chunk_of_the_wrong_shape_is_malformed(wire: Wire) -> None:
    if wire.dialect != "openai":
        pytest.skip("the OpenAI adapter reads its chunks as plain JSON")
    model = wire.model(PLAIN)
    bad = sse_reply("openai", "plain", Turn()).events[0]
    shapes = [{**bad, "choices": {"0": {}}}, {**bad, "choices": [{"index": 0, "delta": {"content": 7}}]}]
    for shape in shapes:
        wire.server.script(*[Reply(events=(shape,))] * 3)
        with pytest.raises(MalformedResponse, match="protocol has none"):
            await collect(model, ModelRequest(messages=HELLO))


async def test_invalid_tool_call_json_is_passed_on_raw_for_the_engine_to_report(wire: Wire) -> None:
    model = wire.model(PLAIN)
    wire.server.script(sse_reply(wire.dialect, "plain", Turn(calls=(("kb_search", '{"query": "unfinished'),))))
    response, _ = await collect(model, ModelRequest(messages=HELLO, tools=(SEARCH,)))
    call = response.tool_calls[0]
    assert call.name == "kb_search" and call.arguments == '{"query": "unfinished'
    with pytest.raises(ValueError):
        call.parsed_arguments()


async def test_official_openai_gets_max_completion_tokens_and_a_prompt_cache_key(wire: Wire) -> None:
    if wire.dialect != "openai":
        pytest.skip("OpenAI only")
    provider = make_provider("openai", wire.server, official=True)
    assert isinstance(provider, OpenAIProvider)
    model = OpenAIModel(REASONER, provider)
    wire.server.script(sse_reply("openai", "reasoner", Turn("a")), sse_reply("openai", "reasoner", Turn("b")))
    await collect(model, ModelRequest(messages=HELLO, max_output_tokens=2_000, reasoning_effort="low"))
    await collect(
        model, ModelRequest(messages=(*HELLO, Message.assistant("a"), Message.user("again")), max_output_tokens=2_000)
    )
    first, second = (r.body for r in wire.server.requests)
    await provider.aclose()
    assert first["max_completion_tokens"] == 2_000 and "max_tokens" not in first
    assert first["reasoning_effort"] == "low"
    # The same conversation keeps the same key: the provider routes it to the same cache.
    assert first["prompt_cache_key"] == second["prompt_cache_key"]


async def test_magistral_reasons_natively_and_is_sent_no_effort(wire: Wire) -> None:
    if wire.dialect != "mistral":
        pytest.skip("Mistral only")
    model = wire.model(REASONER, native_reasoning=True)
    wire.server.script(sse_reply("mistral", "reasoner", Turn("a")))
    await collect(model, ModelRequest(messages=HELLO, reasoning_effort="high"))
    assert "reasoning_effort" not in wire.server.requests[0].body


async def test_thinking_chunks_are_not_shown(wire: Wire) -> None:
    if wire.dialect != "mistral":
        pytest.skip("Mistral only")
    model = wire.model(REASONER, native_reasoning=True)
    reply = sse_reply("mistral", "reasoner", Turn("Answer."))
    thinking = {
        **reply.events[0],
        "choices": [
            {
                "index": 0,
                "delta": {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]}]},
                "finish_reason": None,
            }
        ],
    }
    wire.server.script(type(reply)(events=(thinking, *reply.events)))
    response, _ = await collect(model, ModelRequest(messages=HELLO))
    assert response.text == "Answer."


async def test_tool_call_part_type(wire: Wire) -> None:
    """Every yielded tool call is a ``ToolCallPart`` carrying a complete ``ToolCall``."""
    model = wire.model(PLAIN)
    wire.server.script(sse_reply(wire.dialect, "plain", Turn(calls=(("kb_read", '{"ids": ["d"]}'),))))
    _, parts = await collect(model, ModelRequest(messages=HELLO, tools=(READ,)))
    (part,) = [p for p in parts if isinstance(p, ToolCallPart)]
    assert part.call.arguments == '{"ids": ["d"]}'


async def test_a_clients_sampling_and_format_reach_the_provider_in_its_own_names(wire: Wire) -> None:
    model = wire.model(PLAIN, api_model="plain-2024")
    wire.server.script(sse_reply(wire.dialect, "plain-2024", Turn('{"greeting": "hello"}')))
    fmt = {"type": "json_schema", "json_schema": {"name": "greeting", "schema": {"type": "object"}, "strict": True}}
    sampling = Sampling(
        max_tokens=50,
        temperature=0.3,
        top_p=0.8,
        stop=("END",),
        seed=11,
        presence_penalty=0.5,
        frequency_penalty=0.2,
        user="client-7",
        response_format=fmt,
    )

    await collect(model, ModelRequest(messages=HELLO, max_output_tokens=50, sampling=sampling))

    body = wire.server.requests[0].body
    assert body["max_tokens"] == 50 and body["response_format"]["json_schema"]["name"] == "greeting"
    assert (body["temperature"], body["top_p"], body["stop"]) == (0.3, 0.8, ["END"])
    assert (body["presence_penalty"], body["frequency_penalty"]) == (0.5, 0.2)
    if wire.dialect == "openai":
        assert body["seed"] == 11 and body["user"] == "client-7" and model.dropped(sampling) == ()
    else:  # Mistral's seed is random_seed; it takes no user (it refuses fields it does not know)
        assert body["random_seed"] == 11 and "seed" not in body and "user" not in body
        assert model.dropped(sampling) == ("user",)
