"""The API's cap on a delegation (``max_delegation_eur``): over it the agents are not launched and the main model
answers without them; under it they launch. Either way the ``agents`` call is a step with both estimates and the cap,
and each agent's step carries its estimate beside its cost."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.api_support import Live

pytestmark = pytest.mark.slow

QUESTION = "Bimbamjob: invoicing 2024, payment follow-up, commercial relationship. Conclude on the risk."
DELEGATING = {"tools_enabled": ["kb:factures", "kb:comptes-rendus", "agents"]}


def ask(live: Live, **extra: Any) -> dict[str, Any]:
    completion = live.client().chat.completions.create(
        model="demo-large", messages=[{"role": "user", "content": QUESTION}], extra_body={**DELEGATING, **extra}
    )
    return completion.model_dump()


def delegations(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in steps if s["type"] == "tool_call" and s["tool"] == "agents"]


def test_over_its_cap_a_delegation_is_not_launched_and_the_run_answers_without_it(live: Live) -> None:
    data = ask(live, max_delegation_eur=0.0001)

    assert data["status"] == "ok" and data["choices"][0]["message"]["content"]
    assert [s for s in data["steps"] if s["type"] == "run_agent"] == []
    (step,) = delegations(data["steps"])
    assert step["ok"] is False and step["reason_code"] == "delegation_cap"
    delegation = step["delegation"]
    assert delegation["decision"] == "refused" and delegation["cap_eur"] == 0.0001 and delegation["tasks"] == 2
    assert delegation["estimate_max_eur"] > 0.0001 and 0 < delegation["estimate_eur"] <= delegation["estimate_max_eur"]
    # Only the main model was called, and billed.
    assert set(data["usage"]["by_model"]) == {"demo-large"}
    run = live.http().get(f"/v1/runs/{data['run_id']}").json()
    assert delegations(run["steps"]) == [step]


def test_under_its_cap_the_agents_launch_and_each_carries_its_estimate_beside_its_cost(live: Live) -> None:
    data = ask(live, max_delegation_eur=50)

    (step,) = delegations(data["steps"])
    assert step["ok"] is True and step["reason_code"] is None
    delegation = step["delegation"]
    assert delegation["decision"] == "launched" and delegation["cap_eur"] == 50
    agents = [s["agent"] for s in data["steps"] if s["type"] == "run_agent"]
    assert len(agents) == 2 == delegation["tasks"]
    assert sum(a["estimate_eur"] for a in agents) == pytest.approx(delegation["estimate_eur"])
    assert sum(a["estimate_max_eur"] for a in agents) == pytest.approx(delegation["estimate_max_eur"])
    for agent in agents:
        assert 0 < agent["cost_eur"] <= agent["estimate_max_eur"] <= 50
    # The delegation's step comes before its agents'.
    assert data["steps"].index(step) < min(i for i, s in enumerate(data["steps"]) if s["type"] == "run_agent")


@pytest.mark.parametrize("cap", [0, -1, "a lot"])
def test_a_cap_that_is_not_a_positive_amount_is_refused(live: Live, cap: object) -> None:
    response = live.http().post(
        "/v1/chat/completions",
        json={"model": "demo-large", "messages": [{"role": "user", "content": "Hi"}], "max_delegation_eur": cap},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_body"
    assert response.json()["error"]["param"] == "max_delegation_eur"
