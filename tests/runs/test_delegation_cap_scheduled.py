"""What a run's delegations are checked against: the cap (the request's or the organisation's, the lowest), who is
asked over it (the chat's user; nobody for an API request or a scheduled task), and the growth per round of the
organisation's recent agents, read from their saved usage steps."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from assistant.engine.estimate import Question
from assistant.engine.events import UsageEvent
from assistant.engine.policy import Policy, RunRequest
from assistant.engine.types import Message
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs import execution, growth, intake
from assistant.runs.models import Conversation, Run, Step
from assistant.runs.start import RunStart
from assistant.runs.steps import save_event


class Watch:
    """Stands for the run's ``leases.Watch``: what it would be asked."""

    async def ask(self, question: Question) -> Any:
        return "launch"


def _start(*, api_key: Any = None, cost_cap_eur: float | None = None, request_cap: float | None = None,
           organisation_cap: float | None = None) -> RunStart:  # fmt: skip
    return RunStart(
        run=Run(api_key=api_key),
        request=RunRequest(messages=(Message.user("Hi"),), model="demo-large", max_delegation_eur=request_cap),
        plan=None,  # type: ignore[arg-type]  # not read here
        policy=Policy(delegation_cap_eur=organisation_cap),
        ledger=None,
        cost_cap_eur=cost_cap_eur,
        language="en",
    )


@pytest.mark.django_db
def test_over_the_organisation_s_cap_the_chat_s_user_is_asked_and_nobody_else(demo_data: None) -> None:
    watch = Watch()
    assert execution._delegation_cap(_start(), watch) is None  # type: ignore[arg-type]  # no cap: nothing to check
    chat = execution._delegation_cap(_start(organisation_cap=0.5), watch)  # type: ignore[arg-type]  # a fake watch: only asked
    assert chat is not None and chat.cap_eur == 0.5 and chat.confirm == watch.ask and chat.confirm_seconds == 120
    key, _ = keys.create_key(Organisation.objects.get(slug="demo"), "k")
    api = execution._delegation_cap(_start(api_key=key, organisation_cap=0.5, request_cap=0.2), watch)  # type: ignore[arg-type]  # a fake watch: only asked
    assert api is not None and api.cap_eur == 0.2 and api.confirm is None  # the lowest; nobody to ask
    task = execution._delegation_cap(_start(cost_cap_eur=1.0, organisation_cap=0.5), watch)  # type: ignore[arg-type]  # a fake watch: only asked
    assert task is not None and task.cap_eur == 0.5 and task.confirm is None  # a scheduled task: nobody to ask


@pytest.mark.django_db
def test_an_api_request_s_cap_is_kept_with_its_run_for_a_worker_to_read(demo_data: None) -> None:
    org = Organisation.objects.get(slug="demo")
    key, _ = keys.create_key(org, "k")
    ask = intake.Ask(text="Bimbamjob?", model="demo-small", level=None, resources=(), max_delegation_eur=0.3)
    start = intake.create_run(keys.api_user(org), org, None, ask, api_key=key)
    assert start.request.max_delegation_eur == 0.3
    from assistant.runs.start import read_start

    again = read_start(start.run.pk)
    assert again is not None and again.request.max_delegation_eur == 0.3


def _agent_steps(run: Run, agent: str, model: str, calls: list[tuple[int, int]], first_seq: int) -> int:
    for i, (prompt, completion) in enumerate(calls):
        event = UsageEvent(agent_id=agent, model=model, prompt_tokens=prompt, completion_tokens=completion, cost_eur=0)
        Step.objects.create(run=run, seq=first_seq + i, kind="usage", agent_id=agent, data=save_event(event))
    return first_seq + len(calls)


@pytest.mark.django_db
def test_the_growth_per_round_is_read_from_the_organisation_s_recent_agents_on_the_model(demo_data: None) -> None:
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    other = Organisation.objects.create(name="Other", slug="other")
    assert growth.agent_growth(org.pk, "demo-small") is None  # none yet: the default is used

    def run_of(organisation: Organisation) -> Run:
        conversation = Conversation.objects.create(organisation=organisation, user=user, title="t")
        return Run.objects.create(conversation=conversation, organisation=organisation, user=user, model="demo-large")

    run = run_of(org)
    seq = _agent_steps(run, "agent-1", "demo-small", [(1_000, 100), (1_800, 60), (2_600, 200)], 1)
    seq = _agent_steps(run, "agent-2", "demo-small", [(1_200, 50)], seq)
    _agent_steps(run, "", "demo-small", [(9_000, 900)], seq)  # the main model's call: not an agent's
    _agent_steps(run_of(org), "agent-1", "demo-large", [(5_000, 500), (9_000, 500)], 1)  # another model
    _agent_steps(run_of(other), "agent-1", "demo-small", [(1, 1), (90_001, 1)], 1)  # another organisation

    found = growth.agent_growth(org.pk, "demo-small")
    assert found is not None
    assert found.agents == 2 and found.rounds == 2.0  # (3 + 1) / 2
    assert found.growth_tokens == 800.0  # agent-1: (2,600 - 1,000) / 2; agent-2 made one call
    assert found.output_tokens == pytest.approx((100 + 60 + 200 + 50) / 4)


@pytest.mark.django_db
def test_a_run_s_delegations_read_the_growth_once_in_a_while_not_for_each_one(
    demo_data: None, django_assert_num_queries: Any
) -> None:
    """The figures of hundreds of runs move little from one run to the next: a delegation reads them from the cache
    (no query), and "none ran" is remembered as well as a figure."""
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    assert growth.cached_growth(org.pk, "demo-small") is None
    conversation = Conversation.objects.create(organisation=org, user=user, title="t")
    run = Run.objects.create(conversation=conversation, organisation=org, user=user, model="demo-large")
    _agent_steps(run, "agent-1", "demo-small", [(1_000, 100), (1_800, 60)], 1)
    with django_assert_num_queries(0):
        assert growth.cached_growth(org.pk, "demo-small") is None  # remembered: read again later
    assert growth.agent_growth(org.pk, "demo-small") is not None  # what the next read will find
    with django_assert_num_queries(1):
        assert growth.cached_growth(org.pk, "demo-large") is None  # another model: its own figures
