"""A worker killed mid-call leaves no reservation behind: the reaper of another worker fails its run and gives back,
with the run's lease, the tokens its calls in flight held on the category; the usage page's "In flight" is 0 again.

The worker is frozen (SIGSTOP) until one of its run's calls is seen holding a reservation, then killed with SIGKILL:
no goodbye, no settle.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from asgiref.sync import sync_to_async

from assistant.budgets import state
from assistant.budgets.models import Category, CategoryMonth, Reservation
from assistant.orgs.models import Organisation
from assistant.runs import leases
from assistant.runs.models import Lease, Run
from tests.chat.chat_support import ASK, signed_in
from tests.scale.conftest import Process, executor_pid
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def _in_flight() -> int:
    org = Organisation.objects.get(slug="demo")
    category = Category.objects.get(organisation=org, slug="syntheses")
    return state.state_of(category).reserved


async def test_a_worker_killed_mid_call_leaves_no_reservation_behind(workers: list[Process], demo: None) -> None:
    client, _ = await signed_in()
    assert (await client.post("/c/new", {**ASK, "category": "syntheses"})).status_code == 302
    run = await Run.objects.aget()

    async def delegating() -> bool:
        return await run.steps.filter(kind="agent_action").aexists() and await Lease.objects.filter(run=run).aexists()

    await until(delegating, "the agents' delegation")
    executor = await sync_to_async(executor_pid)(run)
    victim = next(w for w in workers if w.pid == executor)
    held = 0
    for _ in range(200):  # freeze the worker at a moment one of its calls holds a reservation
        os.kill(victim.pid, signal.SIGSTOP)
        held = await Reservation.objects.filter(run=run).acount()
        if held:
            break
        os.kill(victim.pid, signal.SIGCONT)
        await asyncio.sleep(0.01)
    assert held, "no call of the run was caught holding a reservation"
    tokens = await sync_to_async(_in_flight)()
    assert tokens > 0
    await asyncio.to_thread(victim.kill)  # SIGKILL while frozen mid-call

    async def failed() -> bool:
        await run.arefresh_from_db()
        return run.status != "running"

    await until(failed, "the killed run's failure", 30)
    assert run.status == "error" and run.error == leases.DIED.english()
    # Released with its lease, by the other worker's reaper, long before the hour after which stale holds go.
    assert not await Reservation.objects.filter(run=run).aexists()
    assert await sync_to_async(_in_flight)() == 0
    month = await CategoryMonth.objects.aget(category__slug="syntheses", category__organisation__slug="demo")
    assert month.reserved == 0 and month.used >= 0
    page = (await client.get("/settings/usage/")).content.decode()
    row = page.split('data-category="syntheses"', 1)[1].split("</tr>", 1)[0]
    assert row.split('data-label="In flight">', 1)[1].split("</td>", 1)[0] == "0"
