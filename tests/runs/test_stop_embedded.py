"""Stop in the embedded executor while the agents' model calls hang: the run ends at once, each call aborted and
billed as cut, each agent keeping what it had found. (The same on Celery workers: tests/scale/test_workers.py.)

The demo model's ``#demo-hang=600`` makes each agent's calls after its first round (its search) hang for ten
minutes: a Stop that waited for them would never end within the suite's timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command

from assistant.budgets.models import Reservation
from assistant.engine.usage import RunUsage
from assistant.orgs.models import Organisation
from assistant.runs import execution, intake
from assistant.runs.models import Run
from assistant.runs.start import RunStart

pytestmark = pytest.mark.django_db(transaction=True)

HANGING = intake.Ask(
    text="Bimbamjob: invoices 2024 #demo-hang=600",
    model="demo-large",
    level="approfondi",
    resources=("kb:factures", "kb:comptes-rendus", "agents"),
)


def _create() -> RunStart:
    call_command("load_demo", verbosity=0)
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    return intake.create_run(user, org, None, HANGING)


async def _until_the_agents_second_calls_hang(run: Run, agents: int) -> None:
    """Each agent has searched and its second call has started: reserved on the run's category, and not settled."""
    second = run.steps.filter(kind="round_started", data__round=2, data__agent_id__isnull=False)
    while not (
        await run.steps.filter(kind="agent_action").acount() >= agents
        and await second.acount() == agents
        and await Reservation.objects.filter(run=run).acount() == agents
    ):
        await asyncio.sleep(0.02)


async def test_stop_ends_a_run_whose_agents_calls_hang_with_what_they_found(fast_demo: None) -> None:
    start = await sync_to_async(_create)()
    run = start.run
    assert run.category  # its calls are reserved on the demo's default category
    execution.launch(start)
    await _until_the_agents_second_calls_hang(run, 2)
    assert await execution.request_stop(run.pk)
    await execution.wait_for(run.pk)

    await run.arefresh_from_db()
    assert run.status == "stopped"
    steps: list[dict[str, Any]] = [s.data async for s in run.steps.filter(kind="agent_finished").order_by("seq")]
    assert len(steps) == 2
    for agent in steps:
        assert agent["status"] == "stopped" and agent["reason"] == "stopped on request"
        assert agent["cause"]["code"] == "stopped_by_user"
        assert "Searched" in agent["report"]  # what it had found is kept
        # Its search's call billed as reported, its hanging call aborted and billed as an estimate.
        usage = RunUsage.of(agent["usage"])
        assert usage.calls == 2 and usage.tokens_estimated == 1 and usage.failed_calls == 0
    assert not await run.steps.filter(kind="model_call_failed").aexists()  # an abort is not a failure
    usage = RunUsage.of(run.usage)
    assert usage.tokens_estimated == 2 and usage.calls == 5 and run.cost_eur > 0
    assert [s.data["message"] async for s in run.steps.filter(kind="stopped")] == ["stopped on request"]
    assert not await Reservation.objects.filter(run=run).aexists()  # the aborted calls' holds were settled
