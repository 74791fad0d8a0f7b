"""Reservations belong to their run: the first call's is made at intake and handed to that call, and whatever a run
holds goes back when it ends or when its process dies (the reaper, ``recover_runs``), with its lease.

A worker killed mid-call is simulated here (SQLite): a run whose lease's heartbeat is stale, holding the
reservations of its calls in flight. tests/scale kills a real worker with SIGKILL.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.utils import timezone, translation
from pytest_django import Settings

from assistant.budgets import reservations, state
from assistant.budgets.ledger import CategoryLedger
from assistant.budgets.models import CategoryMonth, Reservation
from assistant.engine.types import UsagePart
from assistant.runs import execution, intake, leases
from assistant.runs.models import Lease, Run
from assistant.runs.start import read_start
from tests.budgets.budgets_support import World, signed_in, this_month
from tests.waiting import until

QUESTION = intake.Ask(
    text="What does contract C-2024-002 cover?", model="demo-large", level="rapide", resources=(), category="syntheses"
)


def _in_flight(world: World) -> int:
    return this_month(world.syntheses).reserved


def _dead_run_holding(world: World, heartbeat_age: timedelta, calls: int = 3) -> Run:
    """A run admitted at intake whose worker died while ``calls`` of its model calls (agents') were in flight."""
    run = intake.create_run(world.member, world.demo, None, QUESTION).run
    Lease.objects.create(run=run, executor="gone:1", heartbeat=timezone.now() - heartbeat_age)
    for _ in range(calls - 1):
        reservations.reserve(world.syntheses.pk, 4_000, run_id=run.pk)
    return run


def test_intake_reserves_the_first_call_and_a_refused_request_saves_nothing(world: World) -> None:
    run = intake.create_run(world.member, world.demo, None, QUESTION).run
    (held,) = Reservation.objects.filter(run=run)
    start = read_start(run.pk)
    assert start is not None
    assert held.tokens == intake.first_call_tokens(world.demo, start.request, start.plan, start.policy)
    assert held.tokens > 8_192  # the prompt (system prompt, question) and demo-large's output cap
    assert _in_flight(world) == held.tokens

    # What is left cannot take another such request: refused at intake, nothing saved, nothing held.
    row = this_month(world.syntheses)
    CategoryMonth.objects.filter(pk=row.pk).update(used=world.syntheses.monthly_tokens - held.tokens - 100)
    with pytest.raises(state.CategoryExhausted) as refused, translation.override("en"):
        intake.create_run(world.member, world.demo, None, QUESTION)
    assert not refused.value.spent  # without the other run's hold it would fit: retry in a few seconds
    assert "the rest is reserved by running requests" in str(refused.value)
    assert Run.objects.count() == 1 and Reservation.objects.count() == 1


async def test_the_first_call_takes_the_intake_hold_over_instead_of_reserving_twice(tworld: World) -> None:
    run = (await sync_to_async(intake.create_run)(tworld.member, tworld.demo, None, QUESTION)).run
    held = await Reservation.objects.aget(run=run)
    ledger = CategoryLedger(tworld.syntheses.pk, run_id=run.pk)

    first = await ledger.reserve("demo-large", held.tokens + 50)  # the call needs a little more: the hold grows
    assert isinstance(first, Reservation) and first.pk == held.pk and first.tokens == held.tokens + 50
    assert await sync_to_async(_in_flight)(tworld) == held.tokens + 50
    second = await ledger.reserve("demo-small", 1_000)  # later calls reserve their own
    assert isinstance(second, Reservation) and second.pk != held.pk
    await ledger.settle(first, "demo-large", UsagePart(300, 40), 0.01)
    await ledger.settle(second, "demo-small", None, 0.0)  # not served: released, nothing charged
    await ledger.drain()
    row = await sync_to_async(this_month)(tworld.syntheses)
    assert (row.reserved, row.used, row.calls) == (0, 340, 1)


async def test_a_run_that_ends_gives_back_what_it_held(tworld: World, fast_demo: None) -> None:
    start = await sync_to_async(intake.create_run)(tworld.member, tworld.demo, None, QUESTION)
    await execution.execute_run(start)
    run = start.run
    await run.arefresh_from_db()
    assert run.status == "ok"
    row = await sync_to_async(this_month)(tworld.syntheses)
    assert row.reserved == 0 and not await Reservation.objects.aexists()
    assert row.used == run.usage["total_tokens"] and row.calls == 1


@pytest.mark.django_db(transaction=True)
def test_the_reaper_releases_a_dead_run_s_reservations_with_its_lease(tworld: World) -> None:
    world = tworld
    alive = intake.create_run(world.member, world.demo, None, QUESTION).run  # a live run's hold stays
    Lease.objects.create(run=alive, executor="here:1", heartbeat=timezone.now())
    kept = _in_flight(world)
    dead = _dead_run_holding(world, timedelta(minutes=5))
    assert Reservation.objects.filter(run=dead).count() == 3 and _in_flight(world) > kept

    assert leases.reap() == [dead.pk]

    dead.refresh_from_db()
    assert dead.status == "error" and dead.error == leases.DIED.english()
    assert not Reservation.objects.filter(run=dead).exists()
    assert _in_flight(world) == kept  # the live run's hold is untouched
    Run.objects.filter(pk=alive.pk).update(status="ok")
    reservations.release_run(alive.pk)
    # With nothing running, the usage page says nothing is in flight.
    page = signed_in("demo").get("/settings/usage/").content.decode()
    row = page.split('data-category="syntheses"', 1)[1].split("</tr>", 1)[0]
    in_flight = row.split('<td data-label="In flight">')[1].split("</td>")[0]
    assert in_flight == "0"


@pytest.mark.django_db(transaction=True)
def test_recover_runs_releases_what_the_runs_of_a_stopped_server_held(tworld: World) -> None:
    dead = _dead_run_holding(tworld, timedelta(seconds=0))  # embedded: no process can be executing it
    call_command("recover_runs", verbosity=0)
    dead.refresh_from_db()
    assert dead.status == "error"
    assert not Reservation.objects.exists() and _in_flight(tworld) == 0


def test_a_question_too_long_for_the_main_model_s_window_is_refused_on_the_page_with_the_numbers(
    world: World, settings: Settings
) -> None:
    settings.CHAT_MAX_MESSAGE_CHARS = 1_000_000  # the window's check, not the message limit (32,000 characters)
    question = "Bimbamjob invoices and payments. " * 20_000  # about 165,000 tokens; demo-large's window is 128,000
    response = signed_in("mia").post(
        "/c/new",
        {"text": question, "model": "demo-large", "level": "rapide", "category": "syntheses"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 422
    page = response.content.decode()
    assert "is too long for demo-large" in page and "128,000 tokens" in page
    assert not Run.objects.exists() and not Reservation.objects.exists()


async def test_a_call_s_settlement_is_written_with_the_run_s_next_reservation(tworld: World) -> None:
    """One trip to the database a call: its settlement waits for the next reservation, its hold counted meanwhile."""
    run = (await sync_to_async(intake.create_run)(tworld.member, tworld.demo, None, QUESTION)).run
    ledger = CategoryLedger(tworld.syntheses.pk, run_id=run.pk)
    first = await ledger.reserve("demo-large", 2_000)
    await ledger.settle(first, "demo-large", UsagePart(300, 40), 0.01)
    row = await sync_to_async(this_month)(tworld.syntheses)
    assert (row.reserved, row.used, row.calls) == (2_000, 0, 0)  # not written yet: the hold still counts
    second = await ledger.reserve("demo-small", 1_000)
    row = await sync_to_async(this_month)(tworld.syntheses)
    assert (row.reserved, row.used, row.calls) == (1_000, 340, 1)  # written with the next reservation
    await ledger.settle(second, "demo-small", UsagePart(100, 10), 0.001)

    async def figures() -> tuple[int, int, int]:
        row = await sync_to_async(this_month)(tworld.syntheses)
        return row.reserved, row.used, row.calls

    # No reservation comes: written on its own (after ``ledger.SETTLE_SECONDS``), not left for ``drain``.
    await until(lambda: _equal(figures(), (0, 450, 2)), "the last settlement to be written on its own")
    await ledger.drain()


@pytest.mark.django_db(transaction=True)
def test_a_settlement_and_the_next_reservation_are_one_transaction(tworld: World) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = intake.create_run(tworld.member, tworld.demo, None, QUESTION).run
    ledger = CategoryLedger(tworld.syntheses.pk, run_id=run.pk)
    now = timezone.now()
    first = ledger._reserve(2_000, now)  # takes intake's hold over
    with CaptureQueriesContext(connection) as sent:
        second = ledger._reserve(1_000, now, [(first, 340, 0.01, now)])
    began = [q["sql"] for q in sent if q["sql"].upper().startswith("BEGIN")]  # SQLite's (PostgreSQL's are not sent)
    assert len(began) <= 1, began
    row = this_month(tworld.syntheses)
    assert (row.reserved, row.used, row.calls) == (1_000, 340, 1)
    assert list(Reservation.objects.filter(run=run).values_list("pk", flat=True)) == [second.pk]


@pytest.mark.django_db(transaction=True)
def test_a_settlement_stands_when_the_next_reservation_does_not_fit(tworld: World) -> None:
    from assistant.engine.errors import BudgetExceeded

    run = intake.create_run(tworld.member, tworld.demo, None, QUESTION).run
    ledger = CategoryLedger(tworld.syntheses.pk, run_id=run.pk)
    now = timezone.now()
    first = ledger._reserve(2_000, now)
    budget = tworld.syntheses.monthly_tokens
    with pytest.raises(BudgetExceeded):
        ledger._reserve(budget + 1, now, [(first, 340, 0.01, now)])
    row = this_month(tworld.syntheses)
    assert (row.reserved, row.used, row.calls) == (0, 340, 1)  # what the call used is charged, nothing held
    assert not Reservation.objects.filter(run=run).exists()


async def _equal(value: Awaitable[object], expected: object) -> bool:
    return await value == expected
