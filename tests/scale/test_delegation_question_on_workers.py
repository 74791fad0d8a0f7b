"""A chat run executed by a Celery worker asks the user about a delegation over the organisation's cap: the page
(this process) shows the question, and the answer reaches the worker, through the broadcast the page's answer sends
or through the run's shared field alone, as Stop does."""

from __future__ import annotations

import asyncio
import html
import re

import pytest
from asgiref.sync import sync_to_async

from assistant.engine.events import AgentStarted, DelegationEstimated
from assistant.orgs.models import Organisation
from assistant.runs.models import Run
from assistant.runs.steps import events_of
from tests.chat.chat_support import ASK, Page
from tests.scale.conftest import Process, executor_pid
from tests.sockets import text_from

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

QUESTION_KEY = re.compile(r'name="question" value="([0-9a-f]{32})"')


@pytest.fixture
def capped(demo: None) -> None:
    Organisation.objects.filter(slug="demo").update(delegation_confirm_eur=0.0001)


async def _asked(page: Page) -> tuple[Run, str]:
    """The run asked on ``page``, once the page shows its question about the delegation, and the question's key."""
    await page.client.post(f"/c/{page.conversation.pk}/send", ASK)
    run = await Run.objects.aget(conversation=page.conversation)
    frames = await page.frames_until("Launch the agents")
    assert "The assistant wants to launch 2 agents." in html.unescape(frames)
    return run, QUESTION_KEY.findall(frames)[-1]


async def _ended(page: Page, run: Run, text: str) -> Run:
    frames = ""
    try:
        async with asyncio.timeout(60):
            while text not in frames or f'id="run-{run.pk}" data-status="ok"' not in frames:
                frames += await text_from(page.communicator, timeout=60)
    finally:
        await page.close()
    await run.arefresh_from_db()
    return run


def _facts(run: Run) -> tuple[list[str], int, int]:
    events = events_of(run.steps.all())
    decisions: list[str] = [e.decision for e in events if isinstance(e, DelegationEstimated)]
    agents = sum(isinstance(e, AgentStarted) for e in events)
    return decisions, agents, executor_pid(run)


async def test_the_page_s_answer_reaches_the_worker_and_the_agents_launch(
    workers: list[Process], capped: None, page: Page
) -> None:
    run, key = await _asked(page)
    response = await page.client.post(
        f"/c/{run.conversation_id}/runs/{run.pk}/delegation",
        {"question": key, "launch": "1"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 204
    run = await _ended(page, run, "returned in")
    decisions, agents, executor = await sync_to_async(_facts)(run)
    assert run.status == "ok" and decisions == ["asking", "launched"] and agents == 2
    assert executor in {w.pid for w in workers}  # a worker ran it, and heard the page


async def test_the_shared_field_alone_reaches_the_worker(workers: list[Process], capped: None, page: Page) -> None:
    run, key = await _asked(page)
    # No broadcast: only what the worker reads with the Stop flag.
    await Run.objects.filter(pk=run.pk).aupdate(delegation_answer={"question": key, "launch": False})
    run = await _ended(page, run, "answered without it")
    decisions, agents, executor = await sync_to_async(_facts)(run)
    assert run.status == "ok" and decisions == ["asking", "declined"] and agents == 0
    assert executor in {w.pid for w in workers}
