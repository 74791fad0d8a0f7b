"""A run whose process died keeps what its saved steps say was read: the reaper (scaled out) and
``recover_runs`` (embedded) give it the sources its agents' reads recorded, as a run that ends does,
shown under the answer.

The steps are a real run's (the demo, executed here), cut where its process could have died: after
its agents had searched and read, before any of them returned.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from assistant.engine.events import ErrorEvent
from assistant.orgs.models import Organisation
from assistant.runs import execution, intake, leases
from assistant.runs.models import Conversation, Lease, Message, Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

ASK = intake.Ask(
    text="Bimbamjob: invoices 2024, payments and relationship",
    model="demo-large",
    level="approfondi",
    resources=("kb:factures", "kb:comptes-rendus", "agents"),
)


async def _finished_run() -> Run:
    """The demo's delegating run, executed to its end in this process."""
    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    start = await sync_to_async(intake.create_run)(user, org, None, ASK)
    run = start.run
    await execution.execute_run(start)
    return await Run.objects.aget(pk=run.pk)


def _died_mid_delegation(finished: Run, heartbeat_age: timedelta) -> tuple[Run, list[Step]]:
    """A running run holding the finished run's steps up to its first agent's return, and a lease."""
    steps = list(finished.steps.all())
    first_return = next(s.seq for s in steps if s.kind == "agent_finished")
    saved = [s for s in steps if s.seq < first_return]
    conversation = Conversation.objects.create(organisation=finished.organisation, user=finished.user, title="Dead")
    run = Run.objects.create(
        conversation=conversation,
        organisation=finished.organisation,
        user=finished.user,
        model=finished.model,
        level=finished.level,
        resources=finished.resources,
        answer="Partial answer",
    )
    Message.objects.create(conversation=conversation, role="user", content=ASK.text, run=run)
    Step.objects.bulk_create([Step(run=run, seq=s.seq, kind=s.kind, agent_id=s.agent_id, data=s.data) for s in saved])
    Lease.objects.create(run=run, executor="gone:1", heartbeat=timezone.now() - heartbeat_age)
    return run, saved


def _read_by_agents(finished: Run, saved: list[Step]) -> dict[str, str]:
    """What the agents that had read before the cut returned as their sources, by id (the engine's account)."""
    readers = {s.agent_id for s in saved if s.kind == "agent_action" and s.data["action"]["kind"] == "read"}
    returned = finished.steps.filter(kind="agent_finished", agent_id__in=readers)
    return {src["id"]: src["title"] for step in returned for src in step.data["sources"]}


def _reap() -> list[Any]:
    return leases.reap()


def _recover() -> list[Any]:
    call_command("recover_runs", verbosity=0)
    return []


@pytest.mark.parametrize(
    ("end", "heartbeat_age", "message", "cause"),
    [
        # Scaled out: another worker's reaper sees the lease expired.
        (_reap, timedelta(hours=1), leases.DIED.english(), "process_died"),
        # Embedded: at the server's start no run can be executing, whatever its lease says.
        (_recover, timedelta(seconds=0), "The server stopped while this answer was being written", "server_stopped"),
    ],
    ids=["reaper", "recover_runs"],
)
async def test_a_run_whose_process_died_keeps_the_sources_its_steps_recorded(
    demo_data: None, fast_demo: None, end: Any, heartbeat_age: timedelta, message: str, cause: str
) -> None:
    finished = await _finished_run()
    assert finished.status == "ok" and finished.sources
    dead, saved = await sync_to_async(_died_mid_delegation)(finished, heartbeat_age)
    expected = await sync_to_async(_read_by_agents)(finished, saved)
    assert expected, "the cut keeps at least one agent's read"

    failed = await sync_to_async(end)()
    await dead.arefresh_from_db()

    if end is _reap:
        assert failed == [dead.pk]
    assert dead.status == "error" and dead.error.startswith(message) and dead.finished
    last = await dead.steps.order_by("-seq").afirst()
    assert last is not None and isinstance(last.event, ErrorEvent) and last.event.cause is not None
    assert last.event.cause.code == cause  # why, as data: the page words it in the reader's language
    assert {s["id"]: s["title"] for s in dead.sources} == expected
    assert {s["id"] for s in dead.sources} <= {s["id"] for s in finished.sources}
    assert dead.cost_eur > 0 and await Message.objects.filter(run=dead, role="assistant").aexists()

    # Shown under the answer, as a finished run's sources are.
    client = Client()
    assert await sync_to_async(client.login)(username="demo", password="demo-password")
    page = (await sync_to_async(client.get)(f"/c/{dead.conversation_id}/")).content.decode()
    sources = page.split('<div class="sources">', 1)[1].split("</div>", 1)[0]
    for doc_id, title in expected.items():
        assert doc_id in sources and escape(title) in sources
