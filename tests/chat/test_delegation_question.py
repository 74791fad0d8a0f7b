"""In the chat, a delegation that can cost more than the organisation's cap is asked of the user before its agents
launch: the run pauses, the page shows the estimate with "Launch the agents" / "Answer without them" (also after a
reload), the answer reaches the run, no answer in time answers without them, Stop works while it waits. Only the
run's own user answers, and only the question it asks now."""

from __future__ import annotations

import asyncio
import html
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import AsyncClient
from pytest_django import Settings

from assistant.asgi import application
from assistant.engine.events import AgentStarted, DelegationEstimated
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution
from assistant.runs.models import Conversation, Run
from assistant.runs.steps import events_of
from tests.chat.chat_support import ASK
from tests.sockets import text_from

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]

QUESTION_KEY = re.compile(r'name="question" value="([0-9a-f]{32})"')


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


async def _until(communicator: WebsocketCommunicator, text: str, timeout: float = 20) -> str:
    frames = ""
    async with asyncio.timeout(timeout):
        while text not in frames:
            frames += await text_from(communicator, timeout=timeout)
    return frames


def _capped_conversation(cap: float | None = 0.0001) -> Conversation:
    call_command("load_demo", verbosity=0)
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(memberships__user=user)
    org.delegation_confirm_eur = cap
    org.save(update_fields=["delegation_confirm_eur"])
    return Conversation.objects.create(organisation=org, user=user, title="A conversation")


def _decisions(run: Run) -> list[str]:
    return [e.decision for e in events_of(run.steps.all()) if isinstance(e, DelegationEstimated)]


def _agents(run: Run) -> int:
    return sum(isinstance(e, AgentStarted) for e in events_of(run.steps.all()))


async def _asked(settings: Settings, **extra: Any) -> tuple[AsyncClient, WebsocketCommunicator, Run, str, str]:
    """A run of the demo's delegating question in a conversation of an organisation capped under what it costs,
    followed until the page shows the question; the question's key and the frames so far."""
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.0, 0.05
    conversation = await sync_to_async(_capped_conversation)(**extra)
    client, session = await _signed_in()
    communicator = await _socket(f"/ws/c/{conversation.pk}/", session)
    await client.post(f"/c/{conversation.pk}/send", ASK)
    run = await Run.objects.aget(conversation=conversation)
    frames = await _until(communicator, "Launch the agents")
    keys = QUESTION_KEY.findall(frames)
    assert keys, "the question has its key"
    return client, communicator, run, keys[-1], frames


async def _finish(communicator: WebsocketCommunicator, run: Run) -> Run:
    await communicator.disconnect()
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    return run


async def test_the_question_shows_with_its_figures_survives_a_reload_and_launching_launches(settings: Settings) -> None:
    settings.DELEGATION_CONFIRM_SECONDS = 15
    client, communicator, run, key, frames = await _asked(settings)
    try:
        shown = html.unescape(frames)
        assert "The assistant wants to launch 2 agents." in shown
        assert "more than 0.0001 €, the most your organisation lets a delegation cost without asking" in shown
        assert "Answer without them" in shown
        # The run waits: no agent started, and a reload shows the question with its buttons.
        assert await sync_to_async(_agents)(run) == 0
        async with asyncio.timeout(10):  # the question's step written (the page heard it as it was published)
            while await sync_to_async(_decisions)(run) != ["asking"]:
                await asyncio.sleep(0.05)
        page = html.unescape((await client.get(f"/c/{run.conversation_id}/")).content.decode())
        assert "Launch the agents" in page and f'value="{key}"' in page

        response = await client.post(
            f"/c/{run.conversation_id}/runs/{run.pk}/delegation",
            {"question": key, "launch": "1"},
            headers={"HX-Request": "true"},
        )
        assert response.status_code == 204
    finally:
        run = await _finish(communicator, run)
    assert run.status == "ok"
    assert await sync_to_async(_decisions)(run) == ["asking", "launched"]
    assert await sync_to_async(_agents)(run) == 2


async def test_answering_without_them_answers_without_agents(settings: Settings) -> None:
    client, communicator, run, key, _ = await _asked(settings)
    try:
        await client.post(f"/c/{run.conversation_id}/runs/{run.pk}/delegation", {"question": key, "launch": "0"})
        frames = await _until(communicator, "answered without it")
    finally:
        run = await _finish(communicator, run)
    assert "Delegation not launched: it could cost up to" in html.unescape(frames)
    assert run.status == "ok" and run.answer
    assert await sync_to_async(_decisions)(run) == ["asking", "declined"]
    assert await sync_to_async(_agents)(run) == 0
    page = html.unescape((await client.get(f"/c/{run.conversation_id}/")).content.decode())
    assert "answered without it" in page and "Launch the agents" not in page


async def test_no_answer_in_time_answers_without_them(settings: Settings) -> None:
    settings.DELEGATION_CONFIRM_SECONDS = 0.5
    _client, communicator, run, _key, _ = await _asked(settings)
    try:
        await _until(communicator, "no answer came in time")
    finally:
        run = await _finish(communicator, run)
    assert run.status == "ok"
    assert await sync_to_async(_decisions)(run) == ["asking", "unanswered"]
    assert await sync_to_async(_agents)(run) == 0


async def test_stop_works_while_the_run_waits_for_the_answer(settings: Settings) -> None:
    client, communicator, run, key, _ = await _asked(settings)
    try:
        await client.post(f"/runs/{run.pk}/stop", headers={"HX-Request": "true"})
        await execution.wait_for(run.pk)
    finally:
        run = await _finish(communicator, run)
    assert run.status == "stopped"
    assert await sync_to_async(_decisions)(run) == ["asking", "stopped"]
    # Too late to answer: nothing happens.
    late = await client.post(f"/c/{run.conversation_id}/runs/{run.pk}/delegation", {"question": key, "launch": "1"})
    assert late.status_code == 302
    assert await sync_to_async(_agents)(run) == 0


async def test_only_the_run_s_user_answers_and_only_the_question_asked_now(settings: Settings) -> None:
    client, communicator, run, key, _ = await _asked(settings)
    try:
        org = await Organisation.objects.aget(slug="demo")
        intruder = await sync_to_async(get_user_model().objects.create_user)("mia2", password="mia2-password")
        await Membership.objects.acreate(organisation=org, user=intruder)
        other, _ = await _signed_in("mia2", "mia2-password")
        url = f"/c/{run.conversation_id}/runs/{run.pk}/delegation"
        assert (await other.post(url, {"question": key, "launch": "1"})).status_code == 404
        assert (await client.post(url, {"question": key, "launch": "maybe"})).status_code == 400
        assert (await client.post(url, {"question": "<script>", "launch": "1"})).status_code == 400
        # Another key: not the question the run asks. Said to launch, the run does not: it still waits, and takes the
        # answer to its own question (without them) when it comes.
        await client.post(url, {"question": "0" * 32, "launch": "1"}, headers={"HX-Request": "true"})
        assert (await client.get(url)).status_code == 405  # an answer is a POST
        await client.post(url, {"question": key, "launch": "0"})
        await _until(communicator, "answered without it")
    finally:
        run = await _finish(communicator, run)
    assert await sync_to_async(_decisions)(run) == ["asking", "declined"]


async def test_without_a_cap_nothing_is_asked(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.0, 0.05
    conversation = await sync_to_async(_capped_conversation)(None)
    client, _session = await _signed_in()
    await client.post(f"/c/{conversation.pk}/send", ASK)
    run = await Run.objects.aget(conversation=conversation)
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "ok"
    assert await sync_to_async(_decisions)(run) == ["launched"]
    assert await sync_to_async(_agents)(run) == 2
