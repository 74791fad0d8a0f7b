"""A chat run executed by a Celery worker asks the user about a delegation over the organisation's cap: the page
(this process) shows the question, and the answer reaches the worker, through the broadcast the page's answer sends
or through the run's shared field alone, as Stop does."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import AsyncClient
from pytest_django import Settings

from assistant.asgi import application
from assistant.engine.events import AgentStarted, DelegationEstimated
from assistant.orgs.models import Organisation
from assistant.runs.models import Conversation, Lease, Run
from assistant.runs.steps import events_of
from tests.chat.chat_support import ComposerPost
from tests.scale.conftest import Process
from tests.sockets import text_from

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

ASK: ComposerPost = {
    "text": "Bimbamjob: invoices 2024, payments and relationship",
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
}
QUESTION_KEY = re.compile(r'name="question" value="([0-9a-f]{32})"')


@pytest.fixture(autouse=True)
def fresh_channel_layer(scaled: dict[str, str]) -> Iterator[None]:
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def capped(scaled: dict[str, str]) -> None:
    call_command("load_demo", verbosity=0)
    Organisation.objects.filter(slug="demo").update(delegation_confirm_eur=0.0001)


async def _asked() -> tuple[AsyncClient, WebsocketCommunicator, Run, str]:
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    session = client.cookies["sessionid"].value
    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    conversation = await Conversation.objects.acreate(organisation=org, user=user, title="A conversation")
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"sessionid={session}".encode()),
    ]
    communicator = WebsocketCommunicator(application, f"/ws/c/{conversation.pk}/?lang=en", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    await client.post(f"/c/{conversation.pk}/send", ASK)
    run = await Run.objects.aget(conversation=conversation)
    frames = ""
    async with asyncio.timeout(60):
        while "Launch the agents" not in frames:
            frames += await text_from(communicator, timeout=60)
    assert "The assistant wants to launch 2 agents." in html.unescape(frames)
    return client, communicator, run, QUESTION_KEY.findall(frames)[-1]


async def _ended(communicator: WebsocketCommunicator, run: Run, text: str) -> Run:
    frames = ""
    try:
        async with asyncio.timeout(60):
            while text not in frames or f'id="run-{run.pk}" data-status="ok"' not in frames:
                frames += await text_from(communicator, timeout=60)
    finally:
        await communicator.disconnect()
    await run.arefresh_from_db()
    return run


def _facts(run: Run) -> tuple[list[str], int, int]:
    events = events_of(run.steps.all())
    decisions: list[str] = [e.decision for e in events if isinstance(e, DelegationEstimated)]
    agents = sum(isinstance(e, AgentStarted) for e in events)
    executor = int(Lease.objects.get(run=run).executor.rsplit(":", 1)[1])
    return decisions, agents, executor


async def test_the_page_s_answer_reaches_the_worker_and_the_agents_launch(workers: list[Process], capped: None) -> None:
    client, communicator, run, key = await _asked()
    response = await client.post(
        f"/c/{run.conversation_id}/runs/{run.pk}/delegation",
        {"question": key, "launch": "1"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 204
    run = await _ended(communicator, run, "returned in")
    decisions, agents, executor = await sync_to_async(_facts)(run)
    assert run.status == "ok" and decisions == ["asking", "launched"] and agents == 2
    assert executor in {w.pid for w in workers}  # a worker ran it, and heard the page


async def test_the_shared_field_alone_reaches_the_worker(
    workers: list[Process], capped: None, settings: Settings
) -> None:
    _client, communicator, run, key = await _asked()
    # No broadcast: only what the worker reads with the Stop flag.
    await Run.objects.filter(pk=run.pk).aupdate(delegation_answer={"question": key, "launch": False})
    run = await _ended(communicator, run, "answered without it")
    decisions, agents, executor = await sync_to_async(_facts)(run)
    assert run.status == "ok" and decisions == ["asking", "declined"] and agents == 0
    assert executor in {w.pid for w in workers}
