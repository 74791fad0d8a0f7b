"""Retries as docs/CONFIGURATION.md says, through the real SDK adapters against the local wire servers.

A 429 waits what ``Retry-After`` asks (seconds or an HTTP date), 5 tries in all; a server error is tried 3 times
in all; no wait goes past the agent's or the run's time left: the call fails at once with the provider's error
(billed nothing: the provider refused it), saying the wait asked and the time left.
"""

from __future__ import annotations

import re
import time
from email.utils import formatdate
from pathlib import Path

import pytest

from assistant.engine.agent import run_agent
from assistant.engine.errors import ModelUnavailable, RateLimited
from assistant.engine.models.streaming import RetryPolicy, retry_after
from assistant.engine.outcomes import AgentTask
from assistant.engine.usage import AgentBudget
from tests.providers.provider_support import PLAIN, Wire
from tests.providers.test_billing import REQUEST, failures, harness, usages
from tests.providers.wire import Turn, error_reply, sse_reply

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "CONFIGURATION.md"
DEFAULT = RetryPolicy()
# No backoff to speak of: a 429 without Retry-After, or a 500, is tried again at once.
QUICK = RetryPolicy(base_delay=0.001, max_delay=0.001)

wire_servers = pytest.mark.parametrize("server", ["openai", "mistral", "responses"], indirect=True)


def test_the_docs_say_the_attempts_the_code_makes() -> None:
    text = " ".join(CONFIGURATION.read_text(encoding="utf-8").split())
    paragraph = text[text.index("**What happens when a provider fails.**") :][:900]
    assert f"{DEFAULT.rate_limit_attempts} tries in all" in paragraph
    assert f"{DEFAULT.attempts} tries in all (the first and {DEFAULT.attempts - 1} retries)" in paragraph
    assert f"nor past {DEFAULT.max_retry_after:.0f} s" in paragraph
    assert re.search(r"seconds or an HTTP date", paragraph)


def test_retry_after_in_seconds_in_milliseconds_or_as_an_http_date() -> None:
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    soon = retry_after({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert soon is not None and 28 <= soon <= 30
    assert retry_after({"retry-after": formatdate(time.time() - 30, usegmt=True)}) == 0.0  # already past: at once
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


@wire_servers
async def test_a_rate_limit_is_tried_five_times_in_all(wire: Wire) -> None:
    model = wire.model(PLAIN, retry=QUICK)
    wire.server.script(*(error_reply(wire.dialect, 429, "Too many requests") for _ in range(8)))
    h = harness(wire)
    h.ctx.models = lambda model_id: model
    with pytest.raises(RateLimited):
        await h.ctx.call_model("plain", REQUEST)
    assert len(wire.server.requests) == DEFAULT.rate_limit_attempts == 5
    assert usages(h.events) == [] and h.ctx.usage.failed_calls == 1  # refused each time: billed nothing


@wire_servers
async def test_a_server_error_is_tried_three_times_in_all(wire: Wire) -> None:
    model = wire.model(PLAIN, retry=QUICK)
    wire.server.script(*(error_reply(wire.dialect, 500, "boom") for _ in range(8)))
    h = harness(wire)
    h.ctx.models = lambda model_id: model
    with pytest.raises(ModelUnavailable):
        await h.ctx.call_model("plain", REQUEST)
    assert len(wire.server.requests) == DEFAULT.attempts == 3


@wire_servers
async def test_a_retry_after_given_as_an_http_date_is_waited_for(wire: Wire) -> None:
    h = harness(wire)
    # One second ahead at the date's resolution: the wait is between 0 and 1 s, then the call is tried again.
    wire.server.script(
        error_reply(wire.dialect, 429, "Slow down", {"retry-after": formatdate(time.time() + 1, usegmt=True)}),
        sse_reply(wire.dialect, "plain", Turn("Made it.")),
    )
    response = await h.ctx.call_model("plain", REQUEST)
    assert response.text == "Made it." and len(wire.server.requests) == 2


@wire_servers
async def test_a_wait_longer_than_the_call_may_last_fails_at_once(wire: Wire) -> None:
    h = harness(wire)
    wire.server.script(error_reply(wire.dialect, 429, "Slow down", {"retry-after": "30"}))
    with pytest.raises(RateLimited, match=r"not tried again: that means waiting 30\.0 s, and [0-9.]+ s are left"):
        await h.ctx.call_model("plain", REQUEST, timeout=5)
    assert len(wire.server.requests) == 1
    (failed,) = failures(h.events)
    assert failed.error_kind == "rate_limited" and not failed.billed and failed.status == 429
    assert h.ledger.settled == [(0, None, 0.0)]  # released: the provider refused the call


@wire_servers
async def test_a_wait_past_the_runs_time_left_fails_at_once(wire: Wire) -> None:
    h = harness(wire)
    h.ctx.started = time.monotonic() - (h.ctx.policy.request_seconds - 4)  # 4 s left in the run
    wire.server.script(error_reply(wire.dialect, 429, "Slow down", {"retry-after": "20"}))
    with pytest.raises(RateLimited, match="not tried again"):
        await h.ctx.call_model("plain", REQUEST, timeout=h.ctx.policy.main_call_timeout)
    assert len(wire.server.requests) == 1


@wire_servers
async def test_a_backoff_past_the_time_left_is_not_waited_either(wire: Wire) -> None:
    model = wire.model(PLAIN, retry=RetryPolicy(base_delay=30, max_delay=30))
    h = harness(wire)
    h.ctx.models = lambda model_id: model
    wire.server.script(error_reply(wire.dialect, 503, "overloaded"))
    with pytest.raises(ModelUnavailable, match="not tried again") as caught:
        await h.ctx.call_model("plain", REQUEST, timeout=5)
    assert caught.value.status == 503 and len(wire.server.requests) == 1


@wire_servers
async def test_an_agent_whose_wait_exceeds_its_time_left_ends_in_error_at_once(wire: Wire) -> None:
    h = harness(wire)
    wire.server.script(error_reply(wire.dialect, 429, "Slow down", {"retry-after": "45"}))
    task = AgentTask(instruction="Find the invoices.", model=PLAIN, resources=("kb:factures",), max_rounds=3)
    outcome = await run_agent(h.ctx, "agent-1", task, AgentBudget(max_rounds=3, max_seconds=10), None)
    assert outcome.status == "error" and "rate limiting" in outcome.reason and "not tried again" in outcome.reason
    assert len(wire.server.requests) == 1 and outcome.usage.cost_eur == 0.0
