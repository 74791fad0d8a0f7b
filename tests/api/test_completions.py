"""The official ``openai`` client against the live server: a delegating request on the demo provider,
plain and streamed, with its agents' steps, usage by model and sources; cancel mid-run. Every response
and chunk also passes the client's types validated strictly (the client itself does not validate)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from assistant.demo.model import say
from assistant.demo.model.texts import Language
from tests.api.api_support import Live

pytestmark = pytest.mark.slow

QUESTION = "Bimbamjob: invoicing 2024, payment follow-up, commercial relationship. Conclude on the risk."
DELEGATING = {"tools_enabled": ["kb:factures", "kb:comptes-rendus", "agents"]}
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")


def agents_of(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s["agent"] for s in steps if s["type"] == "run_agent"]


def check_delegation(data: dict[str, Any]) -> None:
    """Agents' steps with their fields; usage by model is the sum of the main rounds and the agents'."""
    agents = agents_of(data["steps"])
    assert len(agents) == 2
    assert {a["resources"][0] for a in agents} == {"kb:factures", "kb:comptes-rendus"}
    for agent in agents:
        assert agent["model"] == "demo-small"
        assert agent["status"] == "ok"
        assert agent["rounds"] >= 2 and agent["seconds"] > 0 and agent["cost_eur"] > 0
        assert agent["report"] and agent["sources"]
        # The agent's own steps have the shape of the main ones.
        assert [s["action"]["kind"] for s in agent["steps"]][:2] == ["search", "read"]
        assert all(s["type"] == "tool_call" and s["ok"] for s in agent["steps"])
        # Each read says what it read: together, what the agent returned as its sources.
        assert {s["id"] for step in agent["steps"] for s in step["sources"]} == {s["id"] for s in agent["sources"]}
    # Rounds are the main model's only.
    rounds = data["rounds"]
    assert rounds and all(r["model"] == "demo-large" for r in rounds)
    summed: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rounds:
        summed[r["model"]].update({f: r[f] for f in TOKEN_FIELDS})
    for agent in agents:
        for model, usage in agent["usage"]["by_model"].items():
            summed[model].update({f: usage[f] for f in TOKEN_FIELDS})
    by_model = data["usage"]["by_model"]
    assert set(by_model) == {"demo-large", "demo-small"}
    for model, usage in by_model.items():
        assert {f: usage[f] for f in TOKEN_FIELDS} == {f: summed[model][f] for f in TOKEN_FIELDS}
    usage = data["usage"]
    assert usage["prompt_tokens"] == sum(u["prompt_tokens"] for u in by_model.values())
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["cost_eur"] == pytest.approx(
        sum(r["cost_eur"] for r in rounds) + sum(a["cost_eur"] for a in agents), rel=1e-4
    )
    assert "carbon_g" in usage and "carbon_estimated" in usage
    # Every call answered: every cost is the provider's reported usage, nothing of it estimated.
    assert all(r["cost_source"] == "reported" and r["estimated_eur"] == 0 for r in rounds)
    assert all(a["estimated_eur"] == 0 for a in agents) and usage["estimated_eur"] == 0
    assert all(u["estimated_eur"] == 0 for u in by_model.values())
    # What the agents read is in the answer's sources.
    source_ids = {s["id"] for s in data["sources"]}
    assert source_ids and all({s["id"] for s in a["sources"]} <= source_ids for a in agents)


def test_a_delegating_request(live: Live) -> None:
    completion = live.client().chat.completions.create(
        model="demo-large", messages=[{"role": "user", "content": QUESTION}], extra_body=DELEGATING
    )
    assert completion.object == "chat.completion"
    assert completion.choices[0].finish_reason == "stop"
    ChatCompletion.model_validate(completion.model_dump())
    assert "Bimbamjob" in (completion.choices[0].message.content or "")
    data = completion.model_dump()
    assert data["status"] == "ok"
    check_delegation(data)
    assert completion.usage is not None and completion.usage.total_tokens > 0

    # The same run, fetched by its id, says the same.
    run = live.http().get(f"/v1/runs/{data['run_id']}").json()
    assert run["status"] == "ok" and run["finished"]
    assert run["answer"] == completion.choices[0].message.content
    assert run["steps"] == data["steps"] and run["usage"]["by_model"] == data["usage"]["by_model"]


def test_a_delegating_request_streamed(live: Live) -> None:
    stream = live.client().chat.completions.create(
        model="demo-large", messages=[{"role": "user", "content": QUESTION}], extra_body=DELEGATING, stream=True
    )
    order: list[tuple[str, str | None]] = []
    text: list[str] = []
    final: dict[str, Any] = {}
    actions: list[dict[str, Any]] = []
    finish = None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        ChatCompletionChunk.model_validate(chunk.model_dump())
        extra = chunk.model_extra or {}
        if chunk.choices:
            choice = chunk.choices[0]
            finish = choice.finish_reason or finish
            if choice.delta.content:
                text.append(choice.delta.content)
                order.append(("text", None))
        elif "event" in extra:
            event = extra["event"]
            order.append((event["type"], event.get("agent_id")))
            if event["type"] in ("agent_started", "agent_finished"):
                assert event["agent"]["id"] == event["agent_id"]
                assert event["agent"]["model"] == "demo-small"
            if event["type"] == "agent_action":
                assert event["step"]["action"]["kind"] in ("search", "read", "query")
                actions.append(event["step"]["action"])
        elif "steps" in extra:
            final = {**extra, "usage": chunk.usage.model_dump() if chunk.usage else None}
    assert finish == "stop"
    assert final["status"] == "ok"
    check_delegation(final)
    # The invoices agent queried the demo's invoices table: its SQL and row count, as the panel shows them.
    [query] = [a for a in actions if a["kind"] == "query"]
    assert query["label"].startswith("SELECT client, SUM(montant) AS total") and query["count"] == 5

    # Each agent: started (with its id), acted, finished — all before the answer's last deltas.
    agent_ids = [a["id"] for a in agents_of(final["steps"])]
    for agent_id in agent_ids:
        kinds = [kind for kind, who in order if who == agent_id]
        assert kinds[0] == "agent_started" and kinds[-1] == "agent_finished" and "agent_action" in kinds[1:-1]
    last_agent_event = max(i for i, (kind, _) in enumerate(order) if kind == "agent_finished")
    assert ("text", None) in order[last_agent_event:]

    run = live.http().get(f"/v1/runs/{final['run_id']}").json()
    assert "".join(text) == run["answer"]
    # The stream's last chunk, built from the steps it streamed, says what the run's saved steps say.
    assert (final["steps"], final["rounds"], final["sources"]) == (run["steps"], run["rounds"], run["sources"])


def test_cancel_mid_run(live: Live) -> None:
    """Cancel once an agent has acted: the run ends stopped, each agent's partial findings in its step."""
    stream = live.client().chat.completions.create(
        model="demo-large", messages=[{"role": "user", "content": QUESTION}], extra_body=DELEGATING, stream=True
    )
    http = live.http()
    run_id = None
    cancelled: dict[str, Any] = {}
    final: dict[str, Any] = {}
    finish: str | None = None
    for chunk in stream:
        ChatCompletionChunk.model_validate(chunk.model_dump())  # OpenAI's finish reasons only
        extra = chunk.model_extra or {}
        run_id = run_id or extra.get("run_id")
        if chunk.choices:
            finish = chunk.choices[0].finish_reason or finish
        event = extra.get("event") or {}
        if event.get("type") == "agent_action" and not cancelled:
            response = http.post(f"/v1/runs/{run_id}/cancel")
            assert response.status_code == 200
            cancelled = response.json()
        if "steps" in extra:
            final = extra
    assert cancelled["stop_requested"] is True
    # OpenAI's finish reason; that the run was stopped, and why, is in the last chunk's status and reason.
    assert finish == "stop"
    assert (
        final["status"] == "stopped"
        and final["reason"] == "stopped on request"
        and final["reason_code"] == "stopped_by_user"
    )

    run = http.get(f"/v1/runs/{run_id}").json()
    assert run["status"] == "stopped" and run["finished"] and run["reason_code"] == "stopped_by_user"
    agents = agents_of(run["steps"])
    assert agents and all(a["status"] in ("stopped", "ok") for a in agents)
    stopped = [a for a in agents if a["status"] == "stopped"]
    assert stopped, agents
    for agent in stopped:
        assert "Stopped on request" in agent["report"]
        assert agent["reason"] == "stopped on request" and agent["reason_code"] == "stopped_by_user"
    # What they had done before the stop is kept: at least the search that triggered the cancel.
    assert any(a["steps"] for a in agents)
    # Cancelling a finished run changes nothing.
    again = http.post(f"/v1/runs/{run_id}/cancel").json()
    assert again["status"] == "stopped"


def test_a_conversation_and_a_system_prompt_are_read(live: Live) -> None:
    completion = live.client().chat.completions.create(
        model="demo-small",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": [{"type": "text", "text": "Which invoices of Bimbamjob are unpaid?"}]},
        ],
        extra_body={"tools_enabled": ["kb:factures"], "reasoning_level": "standard", "category": "catalogue"},
    )
    data = completion.model_dump()
    assert data["status"] == "ok"
    assert not agents_of(data["steps"])  # no agents asked for
    assert [s["tool"] for s in data["steps"]][:1] == ["kb_search"]
    run = live.http().get(f"/v1/runs/{data['run_id']}").json()
    assert run["reasoning_level"] == "standard" and run["category"] == "catalogue"
    assert run["tools_enabled"] == ["kb:factures"]


@pytest.mark.parametrize(("accept", "language"), [("fr-FR,fr;q=0.9", "fr"), ("en-GB,en;q=0.8", "en"), (None, "en")])
def test_the_demo_answers_in_the_accept_language_when_the_question_does_not_tell(
    live: Live, accept: str | None, language: Language
) -> None:
    headers = {"Accept-Language": accept} if accept else {}
    # A bare name: neither French nor English, so the demo writes in the reader's language.
    completion = live.client().chat.completions.create(
        model="demo-large", messages=[{"role": "user", "content": "Bimbamjob"}], extra_headers=headers
    )
    assert (completion.choices[0].message.content or "").endswith(say("footer", language))
