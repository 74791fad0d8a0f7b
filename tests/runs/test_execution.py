"""What the ``runs`` app takes from the apps above it, registered at their start: the category budgets'
accounting (``budgets``) and the Celery executor (``workers``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from pytest_django import Settings

from assistant.budgets.ledger import CategoryAccounting
from assistant.orgs.models import Organisation
from assistant.runs import accounting, execution, intake, leases
from assistant.runs.messages import RunMessage
from assistant.runs.models import Run

ASK = intake.Ask(text="Bimbamjob?", model="demo-small", level="rapide", resources=(), category="administration")


def test_the_budgets_accounting_is_registered_at_start() -> None:
    assert isinstance(accounting.accounting(), CategoryAccounting)


@pytest.mark.django_db
def test_no_run_starts_without_an_accounting(demo_data: None) -> None:
    user = get_user_model().objects.get(username="demo")
    budgets = accounting.register(None)  # as a project without assistant.budgets
    try:
        with pytest.raises(ImproperlyConfigured, match=r"assistant\.budgets"):
            intake.create_run(user, Organisation.objects.get(slug="demo"), None, ASK)
    finally:
        accounting.register(budgets)
    assert not Run.objects.exists()
    assert isinstance(accounting.accounting(), CategoryAccounting)


@pytest.fixture
def unreachable_queue(settings: Settings) -> Iterator[None]:
    from assistant.workers import celery

    executor, broker = settings.RUNS_EXECUTOR, settings.CELERY_BROKER_URL
    settings.RUNS_EXECUTOR = "celery"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    celery.configure()
    yield
    settings.RUNS_EXECUTOR, settings.CELERY_BROKER_URL = executor, broker
    celery.configure()


@pytest.mark.django_db(transaction=True)
async def test_scaled_out_a_run_goes_to_the_workers_executor(demo_data: None, unreachable_queue: None) -> None:
    """``RUNS_EXECUTOR=celery`` hands the run to the executor ``workers`` registered: with the queue
    unreachable, the run fails at once, saying so, instead of executing here."""
    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    start = await sync_to_async(intake.create_run)(user, org, None, ASK)
    run = start.run
    await execution.launch(start)
    run = await Run.objects.aget(pk=run.pk)
    assert (run.status, run.error) == ("error", leases.NOT_QUEUED.english())
    # No model was called here: the one step says why the run failed.
    assert [s.kind async for s in run.steps.all()] == ["error"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("reaped", [False, True])
async def test_a_runs_end_names_its_last_step_and_answer_only_when_its_own_end_was_saved(
    demo_data: None, fast_demo: None, reaped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end a run announces names its last step and its answer's length (a follower that has them reads nothing
    back); not when a reaper failed the run meanwhile: the reaper's step comes after them."""
    from assistant.runs import local
    from assistant.runs.models import Step

    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    start = await sync_to_async(intake.create_run)(user, org, None, ASK)
    run = start.run
    heard: list[RunMessage] = []
    failing: list[asyncio.Future[int]] = []

    def hear(message: RunMessage) -> None:
        heard.append(message)
        if reaped and not failing:  # a reaper that took this process for dead fails the run as it goes on
            failing.append(asyncio.ensure_future(Run.objects.filter(pk=run.pk).aupdate(status="error")))

    local.listen(run.pk.hex, hear)
    try:
        await execution.launch(start)
    finally:
        local.unlisten(run.pk.hex, hear)
    (end,) = [m for m in heard if m["type"] == "run.finished"]
    saved = await Run.objects.aget(pk=run.pk)
    if reaped:
        assert "seq" not in end and "answer_length" not in end
    else:
        assert end["seq"] == await Step.objects.filter(run=run).acount() > 0
        assert end["answer_length"] == len(saved.answer) > 0


@pytest.mark.django_db(transaction=True)
async def test_a_runs_end_is_awaited_by_the_subscribers_of_run_finished(demo_data: None, fast_demo: None) -> None:
    """What goes on from a run's end (the conversation's queue) subscribes to ``ends.run_finished``: its receivers are
    awaited once the run's end is published, with its conversation; one that fails does not keep the others from
    it."""
    from assistant.runs import ends

    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    start = await sync_to_async(intake.create_run)(user, org, None, ASK)
    heard: list[tuple[int, str]] = []

    async def failing(conversation_id: int, **kwargs: Any) -> None:
        raise RuntimeError("a receiver that fails")

    async def hearing(conversation_id: int, **kwargs: Any) -> None:
        heard.append((conversation_id, (await Run.objects.aget(pk=start.run.pk)).status))

    ends.run_finished.connect(failing)
    ends.run_finished.connect(hearing)
    try:
        await execution.launch(start)
    finally:
        ends.run_finished.disconnect(failing)
        ends.run_finished.disconnect(hearing)
    assert heard == [(start.run.conversation_id, "ok")]  # its end saved before
