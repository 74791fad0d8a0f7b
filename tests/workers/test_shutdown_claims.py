"""A worker told to shut down stops its runs (``execution.stop_all``), also those it claims afterwards: a run being
claimed at that moment, or a task it had already received, is stopped at once instead of keeping the worker's
warm shutdown waiting for all its model calls."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from assistant.engine.causes import Cause
from assistant.orgs.models import Organisation
from assistant.runs import execution, intake
from assistant.runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

ASK = intake.Ask(
    text="Bimbamjob: invoices 2024, payments and relationship",
    model="demo-large",
    level="approfondi",
    resources=("kb:factures", "kb:comptes-rendus", "agents"),
)


async def test_a_run_claimed_after_the_shutdown_began_is_stopped_at_once(demo_data: None, fast_demo: None) -> None:
    """The shutdown is this event loop's (a worker's runs' loop): the next test's loop is not shutting down."""
    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    start = await sync_to_async(intake.create_run)(user, org, None, ASK)
    run = start.run
    assert execution.stop_all(Cause(code="server_shutdown")) == 0  # nothing executing yet
    await execution.execute_run(start)
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "stopped", run.error
    [stopped] = [s.data async for s in run.steps.filter(kind="stopped")]
    assert stopped["cause"]["code"] == "server_shutdown"
    assert not await run.steps.filter(kind="usage").aexists()  # no model call was made
