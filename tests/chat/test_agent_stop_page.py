"""*Stop this agent*: the page's button stops one working agent, alone, for the conversation's owner only; its line
says so live, its sibling and the run go on. (The engine's side: tests/engine/test_stop_one_agent.py; on Celery
workers: tests/scale/test_workers.py.)

The demo's ``#demo-hang=1`` makes each agent's calls after its first round wait a second: the stop comes while a
call is in flight.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import AsyncClient, Client
from pytest_django import Settings

from assistant.asgi import application
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution
from assistant.runs.models import Conversation, Run, Step
from tests.chat.chat_support import ASK
from tests.sockets import text_from

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]

HANGING = {**ASK, "text": ASK["text"] + " #demo-hang=1"}


async def _signed_in(username: str = "demo", password: str = "demo-password") -> tuple[AsyncClient, str]:
    client = AsyncClient()
    assert await client.alogin(username=username, password=password)
    return client, client.cookies["sessionid"].value


async def _socket(path: str, session: str) -> WebsocketCommunicator:
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"sessionid={session}".encode()),
    ]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _until_finished(communicator: WebsocketCommunicator, run: Run) -> list[str]:
    frames: list[str] = []
    finished = re.compile(rf'<article class="answer" id="run-{run.pk}" data-status="(ok|stopped|error)"')
    async with asyncio.timeout(30):
        while True:
            frames.append(await text_from(communicator, timeout=30))
            if finished.search(frames[-1]):
                return frames


def _conversation() -> Conversation:
    call_command("load_demo", verbosity=0)
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(memberships__user=user)
    return Conversation.objects.create(organisation=org, user=user, title="A conversation")


async def _until_both_agents_wait_on_their_second_call(run: Run) -> None:
    second = Step.objects.filter(run=run, kind="round_started", data__round=2, data__agent_id__isnull=False)
    async with asyncio.timeout(30):
        while await second.acount() < 2:
            await asyncio.sleep(0.02)


async def test_stop_this_agent_stops_it_alone_and_its_line_says_so(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.0, 0.0
    conversation = await sync_to_async(_conversation)()
    client, session = await _signed_in()
    communicator = await _socket(f"/ws/c/{conversation.pk}/", session)
    try:
        await client.post(f"/c/{conversation.pk}/send", HANGING)
        run = await Run.objects.aget(conversation=conversation)
        await _until_both_agents_wait_on_their_second_call(run)
        page = (await client.get(f"/c/{conversation.pk}/")).content.decode()
        stop_url = f"/runs/{run.pk}/agents/agent-1/stop"
        assert page.count('class="link stop-agent"') == 2 and f'hx-post="{stop_url}"' in page
        response = await client.post(stop_url, headers={"HX-Request": "true"})
        assert response.status_code == 200 and "Stopping this agent…" in response.content.decode()
        frames = await _until_finished(communicator, run)
    finally:
        await communicator.disconnect()
    await execution.wait_for(run.pk)

    await run.arefresh_from_db()
    assert run.status == "ok"  # the run went on
    ends = {s.agent_id: s.data async for s in Step.objects.filter(run=run, kind="agent_finished")}
    assert ends["agent-1"]["status"] == "stopped"
    cause = {k: v for k, v in ends["agent-1"]["cause"].items() if v is not None}
    assert cause == {"code": "stopped_by_user", "agent_id": "agent-1"}
    assert "Searched" in ends["agent-1"]["report"]  # what it had found is kept
    assert ends["agent-2"]["status"] != "stopped"  # its sibling went on
    final = frames[-1]
    line = re.search(rf'<div class="delegation status-stopped" id="agent-{run.pk}-agent-1".*?</details>', final, re.S)
    assert line is not None and "this agent was stopped on request" in line.group(0)
    assert "stop-agent" not in final  # no button once the agents have ended
    # Stopping it again: it has ended, and stays as it is.
    again = await client.post(stop_url)
    assert again.status_code == 302


def test_only_the_owner_can_stop_an_agent_and_only_an_agent_the_run_started(demo_data: None) -> None:
    demo = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    conversation = Conversation.objects.create(organisation=org, user=demo, title="secret")
    run = Run.objects.create(conversation=conversation, organisation=org, user=demo, model="demo-large")
    Step.objects.create(run=run, seq=1, kind="agent_started", agent_id="agent-1", data={})
    url = f"/runs/{run.pk}/agents/agent-1/stop"

    colleague = get_user_model().objects.create_user("colleague", password="colleague-password")
    Membership.objects.create(organisation=org, user=colleague)
    other_org = Organisation.objects.create(name="Other", slug="other")
    mallory = get_user_model().objects.create_user("mallory", password="mallory-password")
    Membership.objects.create(organisation=other_org, user=mallory)
    for username in ("colleague", "mallory"):
        client = Client()
        assert client.login(username=username, password=f"{username}-password")
        assert client.post(url).status_code == 404

    owner = Client(enforce_csrf_checks=True)
    assert owner.login(username="demo", password="demo-password")
    assert owner.post(url).status_code == 403  # no CSRF token
    owner = Client()
    assert owner.login(username="demo", password="demo-password")
    assert owner.post(f"/runs/{run.pk}/agents/agent-9/stop").status_code == 404  # no such agent in this run
    assert owner.get(url).status_code == 405
    assert owner.post(url).status_code == 302  # its own, running: stopped (nothing executes it here)
