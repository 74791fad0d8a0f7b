"""A worker killed mid-call leaves no reservation behind: the reaper of another worker fails its run and gives back,
with the run's lease, the tokens its calls in flight held on the category; the usage page's "In flight" is 0 again.

The worker is frozen (SIGSTOP) until one of its run's calls is seen holding a reservation, then killed with SIGKILL:
no goodbye, no settle.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.core.management import call_command
from django.test import AsyncClient

from assistant.budgets import state
from assistant.budgets.models import Category, CategoryMonth, Reservation
from assistant.orgs.models import Organisation
from assistant.runs import leases
from assistant.runs.models import Lease, Run
from tests.chat.chat_support import ComposerPost
from tests.scale.conftest import Process
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

ASK: ComposerPost = {
    "text": "Bimbamjob: invoices 2024, payments and relationship",
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
    "category": "syntheses",
}


@pytest.fixture(autouse=True)
def fresh_channel_layer(scaled: dict[str, str]) -> Iterator[None]:
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def demo(scaled: dict[str, str]) -> None:
    call_command("load_demo", verbosity=0)


def _in_flight() -> int:
    org = Organisation.objects.get(slug="demo")
    category = Category.objects.get(organisation=org, slug="syntheses")
    return state.state_of(category).reserved


async def test_a_worker_killed_mid_call_leaves_no_reservation_behind(workers: list[Process], demo: None) -> None:
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    assert (await client.post("/c/new", ASK)).status_code == 302
    run = await Run.objects.aget()

    async def delegating() -> bool:
        return await run.steps.filter(kind="agent_action").aexists() and await Lease.objects.filter(run=run).aexists()

    await until(delegating, "the agents' delegation")
    lease = await Lease.objects.aget(run=run)
    victim = next(w for w in workers if w.pid == int(lease.executor.rsplit(":", 1)[1]))
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
