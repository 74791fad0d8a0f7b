"""``POST /v1/runs/{id}/agents/{agent_id}/cancel``: one agent stopped alone, its figures while it works, and the
404s. The demo's ``#demo-hang=1`` makes each agent's calls after its first round wait a second: the cancel comes
while a call is in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.core.management import call_command

from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs import execution
from assistant.runs.models import Run, Step
from tests.api.api_support import asgi_client

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Bimbamjob: invoices 2024, payments and relationship #demo-hang=1"


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _keys() -> tuple[str, str]:
    call_command("load_demo", verbosity=0)
    demo = Organisation.objects.get(slug="demo")
    other = Organisation.objects.create(name="Other Company", slug="other")
    return keys.create_key(demo, "agents")[1], keys.create_key(other, "other's")[1]


async def _both_agents_wait_on_their_second_call() -> Run:
    async with asyncio.timeout(30):
        while True:
            run = await Run.objects.filter(api_key__isnull=False).afirst()
            if run is not None:
                second = Step.objects.filter(
                    run=run, kind="round_started", data__round=2, agent_id__startswith="agent-"
                )
                if await second.acount() == 2:
                    return run
            await asyncio.sleep(0.02)


async def test_one_agent_is_stopped_alone_and_the_run_goes_on(fast_demo: None) -> None:
    secret, other_secret = await sync_to_async(_keys)()
    body: dict[str, Any] = {
        "model": "demo-large",
        "messages": [{"role": "user", "content": QUESTION}],
        "reasoning_level": "approfondi",
        "tools_enabled": ["kb:factures", "kb:comptes-rendus", "agents"],
    }
    async with asgi_client(secret) as client, asgi_client(other_secret) as other:
        asking = asyncio.ensure_future(client.post("/v1/chat/completions", json=body))
        run = await _both_agents_wait_on_their_second_call()

        # While they work: each agent's figures so far, and what it had left as its latest round started.
        live = (await client.get(f"/v1/runs/{run.pk}")).json()
        agents = {s["agent"]["id"]: s["agent"] for s in live["steps"] if s["type"] == "run_agent"}
        for agent in agents.values():
            assert agent["status"] == "running" and agent["rounds"] == 2
            left = agent["budget_left"]
            assert left["round"] == 2 and left["rounds"] == agent["max_rounds"] - 1
            assert left["tokens"] == 60_000 - agent["usage"]["total_tokens"]
            assert agent["usage"]["total_tokens"] > 0 and agent["cost_eur"] > 0

        # Another organisation's key, an unknown agent: 404.
        refused = await other.post(f"/v1/runs/{run.pk}/agents/agent-1/cancel")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "run_not_found"
        unknown = await client.post(f"/v1/runs/{run.pk}/agents/agent-9/cancel")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "agent_not_found"

        cancelled = await client.post(f"/v1/runs/{run.pk}/agents/agent-1/cancel")
        assert cancelled.status_code == 200
        agent = cancelled.json()
        assert (agent["id"], agent["status"], agent["reason_code"]) == ("agent-1", "stopped", "stopped_by_user")
        assert "Searched" in agent["report"] and agent["budget_left"] is None

        response = await asking
        again = await client.post(f"/v1/runs/{run.pk}/agents/agent-1/cancel")
    await execution.wait_for(run.pk)

    assert response.status_code == 200
    done = response.json()
    assert done["status"] == "ok"  # the run went on
    ended = {s["agent"]["id"]: s["agent"] for s in done["steps"] if s["type"] == "run_agent"}
    assert ended["agent-1"]["status"] == "stopped" and ended["agent-2"]["status"] != "stopped"
    # An agent that has ended is returned as it stands.
    assert again.status_code == 200
    assert {k: v for k, v in again.json().items() if k != "steps"} == {
        k: v for k, v in ended["agent-1"].items() if k != "steps"
    }
