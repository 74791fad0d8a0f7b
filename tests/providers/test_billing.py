"""Billing by kind of failure, through the real SDK adapters against the local wire servers.

A call the provider answered with an HTTP error (4xx, 5xx: nothing streamed) bills nothing and releases its
reservation; a call cut after it was sent bills the provider's usage when it reported one, else an estimate of
everything sent (messages and tool specs) marked ``tokens_estimated``. Every failed call is counted in
``failed_calls`` and is a ``model_call_failed`` step of its agent (or of the main model).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

from assistant.api.trace import trace_of
from assistant.api.trace_schemas import AgentStep
from assistant.engine.agent import run_agent
from assistant.engine.catalogue import Catalogue, ModelInfo
from assistant.engine.errors import BadModelRequest, MalformedResponse, ModelError, ModelUnavailable, RateLimited
from assistant.engine.events import Event, ModelCallFailed, UsageEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.outcomes import AgentTask
from assistant.engine.runtime import RunContext
from assistant.engine.tokens import prompt_tokens, request_tokens
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Message, ModelRequest, ToolSpec, UsagePart
from assistant.engine.usage import AgentBudget
from assistant.runs.models import Step
from assistant.runs.steps import save_event
from tests.providers.provider_support import PLAIN, Wire
from tests.providers.wire import Reply, Turn, Usage, error_reply, sse_reply, text_lead

pytestmark = pytest.mark.parametrize("server", ["openai", "mistral", "responses"], indirect=True)

BIG_TOOL = ToolSpec(
    "kb_search",
    "Search the knowledge base. " * 60,
    {"type": "object", "properties": {f"field_{i}": {"type": "string", "description": "x" * 80} for i in range(12)}},
)
HELLO = (Message.system("You are terse."), Message.user("Say hello."))
REQUEST = ModelRequest(messages=HELLO, tools=(BIG_TOOL,), max_output_tokens=500)


class RecordingLedger:
    """A ``UsageLedger`` that remembers what was reserved and how each reservation was settled."""

    def __init__(self) -> None:
        self.reserved: list[int] = []
        self.settled: list[tuple[int, UsagePart | None, float]] = []

    async def reserve(self, model: str, tokens: int) -> object:
        self.reserved.append(tokens)
        return len(self.reserved) - 1

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        assert isinstance(reservation, int)
        self.settled.append((reservation, usage, cost_eur))


@dataclass
class Harness:
    ctx: RunContext
    ledger: RecordingLedger
    events: list[Event]


def harness(wire: Wire, *infos: ModelInfo) -> Harness:
    infos = infos or (PLAIN,)
    for info in infos:
        wire.model(info)
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ledger = RecordingLedger()
    knowledge = MemoryKnowledge({"factures": [Document("doc-1", "factures", "Invoice", "Bimbamjob paid late.")]})
    ctx = RunContext(
        catalogue=Catalogue(list(infos)),
        models=lambda model_id: wire.models[model_id],
        toolbox=Toolbox(knowledge=knowledge),
        emit=emit,
        ledger=ledger,
    )
    return Harness(ctx, ledger, events)


def failures(events: list[Event]) -> list[ModelCallFailed]:
    return [e for e in events if isinstance(e, ModelCallFailed)]


def usages(events: list[Event]) -> list[UsageEvent]:
    return [e for e in events if isinstance(e, UsageEvent)]


@pytest.mark.parametrize(
    ("status", "error", "kind", "headers"),
    [
        (400, BadModelRequest, "bad_request", {}),
        (500, ModelUnavailable, "server_error", {}),
        (429, RateLimited, "rate_limited", {"retry-after": "3600"}),
    ],
)
async def test_a_call_the_provider_refused_bills_nothing(
    wire: Wire, status: int, error: type[ModelError], kind: str, headers: dict[str, str]
) -> None:
    h = harness(wire)
    # A 500 is retried (3 tries in all): each answered 500, none billed.
    wire.server.script(*(error_reply(wire.dialect, status, "refused", headers) for _ in range(3)))

    with pytest.raises(error):
        await h.ctx.call_model("plain", REQUEST)

    usage = h.ctx.usage
    assert usage.calls == 0 and usage.total_tokens == 0 and usage.cost_eur == 0.0
    assert usage.failed_calls == 1 and usage.tokens_estimated == 0
    # The reservation is released with no usage: the category is charged nothing.
    assert h.ledger.settled == [(0, None, 0.0)]
    assert usages(h.events) == []
    (failed,) = failures(h.events)
    assert (failed.model, failed.error_kind, failed.billed, failed.status) == ("plain", kind, False, status)
    data = usage.as_dict()
    assert data["failed_calls"] == 1 and data["total_tokens"] == 0 and data["cost_eur"] == 0


async def test_a_stream_cut_after_it_started_bills_an_estimate_of_everything_sent(wire: Wire) -> None:
    h = harness(wire)
    # Cut after the answer's first three words.
    cut = text_lead(wire.dialect) + 3
    wire.server.script(
        sse_reply(wire.dialect, "plain", Turn("One two three four five six.", usage=None), cut_after=cut)
    )

    with pytest.raises(MalformedResponse):
        await h.ctx.call_model("plain", REQUEST)

    (billed,) = usages(h.events)
    assert billed.estimated is True
    # Everything sent: the messages and the tool specs (the specs are most of this request).
    assert billed.prompt_tokens == prompt_tokens(REQUEST)
    assert billed.prompt_tokens > 3 * request_tokens(REQUEST.messages)
    assert billed.completion_tokens > 0  # the text that streamed back
    usage = h.ctx.usage
    assert usage.calls == 1 and usage.tokens_estimated == 1 and usage.failed_calls == 1
    assert usage.cost_eur == pytest.approx(PLAIN.cost_eur(UsagePart(billed.prompt_tokens, billed.completion_tokens)))
    ((_, settled, cost),) = h.ledger.settled
    assert settled is not None and settled.prompt_tokens == billed.prompt_tokens and cost == usage.cost_eur
    (failed,) = failures(h.events)
    assert failed.billed is True and failed.error_kind == "broken_stream" and failed.status is None
    assert usage.as_dict()["by_model"]["plain"]["tokens_estimated"] == 1
    # Its whole cost is an estimate, and says so: the call, the run's usage as saved and as the API shows it.
    assert billed.cost_source == "estimated" and billed.cost_eur > 0
    assert billed.estimated_eur == pytest.approx(billed.cost_eur)
    assert usage.estimated_eur == pytest.approx(usage.cost_eur)
    assert usage.as_dict()["estimated_eur"] == pytest.approx(usage.cost_eur)
    assert usage.as_dict()["by_model"]["plain"]["estimated_eur"] == pytest.approx(usage.cost_eur)
    steps = [Step.published(None, i, save_event(e)) for i, e in enumerate(h.events, 1)]
    trace = trace_of(steps, usage.as_dict())
    assert trace.usage.estimated_eur == pytest.approx(usage.cost_eur)
    assert trace.usage.by_model["plain"].estimated_eur == pytest.approx(usage.cost_eur)


async def test_a_stream_cut_after_the_provider_reported_its_usage_bills_that_usage(wire: Wire) -> None:
    if wire.dialect != "openai":
        pytest.skip("OpenAI sends the usage in a chunk of its own, before [DONE]")
    h = harness(wire)
    reply = sse_reply(wire.dialect, "plain", Turn("Hello there.", usage=Usage(1_234, 56)))
    wire.server.script(type(reply)(events=reply.events, cut_after=len(reply.events)))  # cut before [DONE]

    with pytest.raises(MalformedResponse):
        await h.ctx.call_model("plain", REQUEST)

    (billed,) = usages(h.events)
    assert (billed.prompt_tokens, billed.completion_tokens, billed.estimated) == (1_234, 56, False)
    assert h.ctx.usage.tokens_estimated == 0 and h.ctx.usage.failed_calls == 1
    # Cut, but priced on what the provider reported: nothing of it is estimated.
    assert billed.cost_source == "reported" and billed.estimated_eur == 0 and billed.cost_eur > 0
    assert h.ctx.usage.estimated_eur == 0 and "estimated_eur" not in h.ctx.usage.as_dict()["by_model"]["plain"]


async def test_an_attempt_cut_before_anything_was_shown_and_tried_again_is_billed_too(wire: Wire) -> None:
    h = harness(wire)
    calls = (("kb_search", '{"query": "a long enough query to be split"}'),)
    # The first attempt reached the server and broke off in the tool call's pieces: the adapter tried again.
    wire.server.script(
        sse_reply(wire.dialect, "plain", Turn(calls=calls), cut_after=3),
        sse_reply(wire.dialect, "plain", Turn(calls=calls, usage=Usage(700, 30))),
    )

    response = await h.ctx.call_model("plain", REQUEST)

    assert len(wire.server.requests) == 2 and response.cut_attempts == 1
    (billed,) = usages(h.events)
    # What the server reported for the answer, plus what the cut attempt was sent.
    assert (billed.prompt_tokens, billed.completion_tokens) == (700 + prompt_tokens(REQUEST), 30)
    assert billed.estimated and h.ctx.usage.tokens_estimated == 1
    assert h.ctx.usage.failed_calls == 0 and failures(h.events) == []
    # Only the cut attempt's part is estimated: the answer's was reported.
    assert billed.cost_source == "estimated"
    assert billed.estimated_eur == pytest.approx(PLAIN.cost_eur(UsagePart(prompt_tokens(REQUEST), 0)))
    assert 0 < billed.estimated_eur < billed.cost_eur
    assert h.ctx.usage.estimated_eur == pytest.approx(billed.estimated_eur)


async def test_a_client_timeout_bills_an_estimate_and_is_a_failed_call(wire: Wire) -> None:
    h = harness(wire)

    # The server answers nothing for longer than the call's timeout: headers never come.
    def slow(body: dict[str, Any]) -> Reply:
        time.sleep(1.5)
        return sse_reply(wire.dialect, "plain", Turn("late"))

    wire.server.brain = slow

    with pytest.raises(ModelError, match="cut after"):
        await h.ctx.call_model("plain", REQUEST, timeout=0.3)

    (billed,) = usages(h.events)
    assert billed.estimated and billed.prompt_tokens == prompt_tokens(REQUEST)
    (failed,) = failures(h.events)
    assert failed.error_kind == "timeout" and failed.billed
    assert h.ctx.usage.failed_calls == 1 and h.ctx.usage.tokens_estimated == 1


async def test_an_agent_whose_calls_fail_with_500_bills_nothing_and_shows_the_failure_in_its_steps(wire: Wire) -> None:
    h = harness(wire)
    wire.server.script(*(error_reply(wire.dialect, 500, "internal error") for _ in range(3)))
    task = AgentTask(instruction="Find the invoices.", model=PLAIN, resources=("kb:factures",), max_rounds=3)

    outcome = await run_agent(h.ctx, "agent-1", task, AgentBudget(max_rounds=3), None)

    assert outcome.status == "error"
    assert outcome.usage.cost_eur == 0.0 and outcome.usage.failed_calls == 1
    assert h.ctx.usage.total_tokens == 0 and h.ctx.usage.failed_calls == 1
    assert h.ledger.settled == [(0, None, 0.0)]
    (failed,) = failures(h.events)
    assert failed.agent_id == "agent-1" and failed.status == 500 and not failed.billed

    # The API shows it among the agent's steps, and counts it in the usage.
    steps = [Step.published(None, i, save_event(e)) for i, e in enumerate(h.events, 1)]
    trace = trace_of(steps, h.ctx.usage.as_dict())
    (agent_step,) = trace.steps
    assert isinstance(agent_step, AgentStep)
    agent = agent_step.agent
    assert agent is not None
    assert [(s.type, getattr(s, "billed", None), getattr(s, "status", None)) for s in agent.steps] == [
        ("model_call_failed", False, 500)
    ]
    assert agent.usage is not None and agent.usage.failed_calls == 1 and agent.usage.total_tokens == 0
    assert trace.usage.failed_calls == 1 and trace.usage.tokens_estimated == 0 and trace.usage.cost_eur == 0
