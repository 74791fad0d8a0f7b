"""Stop aborts a call whose provider hangs mid-stream, through the real SDK adapters against the local wire servers.

The server sends the first chunks of an answer, then nothing more until the client closes the connection, which
it notes: Stop closes the stream (the connection is hung up), the call is billed as cut (an estimate of
everything sent, marked ``tokens_estimated``), an agent keeps what it had found and nothing is asked after Stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from assistant.engine.agent import run_agent
from assistant.engine.cancel import RunStopped
from assistant.engine.causes import Cause
from assistant.engine.events import AgentFinished, ModelCallFailed
from assistant.engine.outcomes import AgentTask
from assistant.engine.tokens import prompt_tokens
from assistant.engine.types import ModelRequest, StreamPart, TextDelta
from assistant.engine.usage import AgentBudget
from tests.providers.provider_support import PLAIN, Wire
from tests.providers.test_billing import REQUEST, harness, usages
from tests.providers.wire import Turn, WireServer, error_reply, sse_reply, text_lead
from tests.waiting import until

pytestmark = pytest.mark.parametrize("server", ["openai", "mistral", "responses"], indirect=True)

PARTIAL = "I am still comparing the invoice with the payments"


async def _when_hanging(server: WireServer) -> None:
    await until(server.hanging.is_set, "the server to hang")


async def _hung_up(server: WireServer, count: int) -> list[int]:
    """The requests whose hanging stream the client closed, once ``count`` were (the server notes it in its thread);
    fails if the connection stays open (a hang guard, not a measure: the stream was closed long before)."""
    await until(lambda: len(server.hung_up) >= count, f"{count} hanging streams closed by the client")
    return server.hung_up


async def test_stop_closes_a_stream_that_hangs_and_bills_it_as_cut(wire: Wire) -> None:
    h = harness(wire)
    words = len(PARTIAL.split())
    # The answer's first chunks (what comes before the text, then each word), then the server hangs before the finish
    # and the usage.
    lead = text_lead(wire.dialect)
    wire.server.script(sse_reply(wire.dialect, "plain", Turn(PARTIAL + " and then more."), hang_after=lead + words))

    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    async def press_stop() -> None:
        await _when_hanging(wire.server)
        await until(lambda: "".join(shown) == PARTIAL, "every chunk sent to reach the caller")
        h.ctx.cancel.cancel()

    stopper = asyncio.ensure_future(press_stop())
    with pytest.raises(RunStopped) as stopped:
        await h.ctx.call_model("plain", REQUEST, on_text=on_text)
    assert stopper.done()
    await stopper

    assert stopped.value.text == PARTIAL and stopped.value.cause == Cause(code="stopped_by_user")
    assert stopped.value.usage is h.ctx.usage
    assert await _hung_up(wire.server, 1) == [0]  # the adapter closed the connection
    (billed,) = usages(h.events)
    assert billed.estimated and billed.prompt_tokens == prompt_tokens(REQUEST) and billed.completion_tokens > 0
    usage = h.ctx.usage
    assert usage.calls == 1 and usage.tokens_estimated == 1 and usage.failed_calls == 0
    ((_, settled, cost),) = h.ledger.settled
    assert settled is not None and settled.prompt_tokens == billed.prompt_tokens and cost == usage.cost_eur > 0
    assert not any(isinstance(e, ModelCallFailed) for e in h.events)
    assert len(wire.server.requests) == 1  # not tried again


async def test_an_agent_whose_call_hangs_is_stopped_at_once_with_what_it_had_read(wire: Wire) -> None:
    h = harness(wire)
    task = AgentTask(instruction="Find the invoices.", model=PLAIN, resources=("kb:factures",), max_rounds=4)
    wire.server.script(
        sse_reply(wire.dialect, "plain", Turn(calls=(("kb_read", '{"ids": ["doc-1"]}'),))),
        sse_reply(
            wire.dialect,
            "plain",
            Turn(PARTIAL, calls=(("kb_search", '{"query": "x"}'),)),
            hang_after=text_lead(wire.dialect) + 2,  # its first two words
        ),
    )

    # What the adapter yields, noted: Stop comes once the hanging answer's first text has reached the agent (its
    # stream is open; the SDKs leave a window, between the response's headers and their stream object, where a
    # cancelled call's connection is not closed).
    model = wire.models["plain"]
    adapter_stream = model.stream
    texts: list[str] = []

    async def noting(request: ModelRequest) -> AsyncIterator[StreamPart]:
        async for part in adapter_stream(request):
            if isinstance(part, TextDelta):
                texts.append(part.text)
            yield part

    model.stream = noting  # type: ignore[method-assign]  # this model's stream, watched: what it yields is noted

    async def press_stop() -> None:
        await _when_hanging(wire.server)
        await until(lambda: texts, "the model's first text")
        h.ctx.cancel.cancel()

    stopper = asyncio.ensure_future(press_stop())
    outcome = await run_agent(h.ctx, "agent-1", task, AgentBudget(max_rounds=4), None)
    assert stopper.done(), (outcome.status, outcome.reason, len(wire.server.requests))
    await stopper

    assert await _hung_up(wire.server, 1) == [1]
    assert len(wire.server.requests) == 2  # nothing asked after Stop
    assert outcome.status == "stopped" and outcome.reason == "stopped on request"
    assert outcome.tools_run == ["kb_read"] and [s.id for s in outcome.sources] == ["doc-1"]
    assert "Invoice" in outcome.report  # what it had read is kept
    usage = outcome.usage.by_model["plain"]
    assert usage.calls == 2 and usage.tokens_estimated == 1 and usage.failed_calls == 0
    (finished,) = [e for e in h.events if isinstance(e, AgentFinished)]
    assert finished.status == "stopped" and finished.cause is not None and finished.cause.code == "stopped_by_user"


async def test_stop_while_waiting_to_retry_a_rate_limit_bills_nothing(wire: Wire) -> None:
    h = harness(wire)
    wire.server.script(error_reply(wire.dialect, 429, "Slow down", {"retry-after": "30"}))

    async def press_stop() -> None:
        await until(lambda: wire.server.answered >= 1, "the server to answer the 429")
        await asyncio.sleep(0.3)  # the adapter has read the 429 and waits the 30 s it asks
        h.ctx.cancel.cancel()

    stopper = asyncio.ensure_future(press_stop())
    with pytest.raises(RunStopped):
        await h.ctx.call_model("plain", REQUEST, timeout=60)
    assert stopper.done()
    await stopper

    assert len(wire.server.requests) == 1
    # The provider refused the only request sent: nothing billed, the reservation released, not a failure.
    assert usages(h.events) == [] and h.ctx.usage.calls == 0 and h.ctx.usage.failed_calls == 0
    assert h.ledger.settled == [(0, None, 0.0)]
    assert not any(isinstance(e, ModelCallFailed) for e in h.events)
