"""The metrics besides a run's: refusals by code, the live chat's open connections, and a Stop's latency."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import AsyncClient
from pytest_django import Settings

from assistant.engine.errors import RequestRefused
from assistant.orgs.models import Organisation
from assistant.runs import execution, intake
from assistant.runs.models import Conversation, Run
from tests.telemetry.telemetry_support import DELEGATING, Exported
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_refused_request_is_counted_by_its_code(exported: Exported) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    user = await get_user_model().objects.aget(username="demo")
    ask = intake.Ask(text="   ", model="demo-large", level=None, resources=())
    with pytest.raises(RequestRefused):
        await sync_to_async(intake.create_run)(user, org, None, ask)
    [point] = exported.metric_points("assistant.refusals")
    assert point.value == 1 and point.attributes == {"assistant.refusal.code": "empty_message"}


async def test_open_chat_connections_are_counted(exported: Exported) -> None:
    from assistant.asgi import application

    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    conversation = await Conversation.objects.acreate(organisation=org, user=user, title="A conversation")
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    sockets = [WebsocketCommunicator(application, f"/ws/c/{conversation.pk}/", headers=headers) for _ in range(2)]
    for socket in sockets:
        connected, _ = await socket.connect()
        assert connected
    # The handshake is answered first; the conversation is found, and the connection counted, after it.
    assert await _connections(exported, 2) == 2
    await sockets[0].disconnect()
    assert await _connections(exported, 1) == 1
    await sockets[1].disconnect()


async def _connections(exported: Exported, expected: int) -> int:
    """The open connections, once they are ``expected`` (or what they are after a few seconds)."""

    def value() -> int:
        [point] = exported.metric_points("assistant.chat.connections")
        return int(point.value or 0)

    await until(lambda: value() == expected, f"{expected} open connections counted")
    return value()


async def test_a_stopped_run_is_counted_with_its_stop_to_end_latency(exported: Exported, settings: Settings) -> None:
    settings.DEMO_PACE = 0.05  # a run slow enough to be stopped in its course
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    user = await get_user_model().objects.aget(username="demo")
    ask = intake.Ask(text="Bimbamjob: invoicing 2024?", model="demo-large", level=None, resources=tuple(DELEGATING))
    start = await sync_to_async(intake.create_run)(user, org, None, ask)
    run: Run = start.run
    execution.launch(start)
    await until(run.steps.filter(kind="agent_started").aexists, "its agents to work")
    assert await execution.request_stop(run.pk)
    await execution.wait_for(run.pk)
    run = await Run.objects.aget(pk=uuid.UUID(str(run.pk)))
    assert run.status == "stopped"
    [stops] = exported.metric_points("assistant.stops")
    assert stops.value == 1 and stops.attributes["assistant.run.reason_code"] == "stopped_by_user"
    [latency] = exported.metric_points("assistant.stop.duration")
    assert latency.count == 1 and latency.sum >= 0
    [root] = [s for s in exported.spans.get_finished_spans() if s.parent is None]
    assert (root.attributes or {})["assistant.run.status"] == "stopped"
    agents = [s for s in exported.spans.get_finished_spans() if s.name.startswith("invoke_agent agent")]
    assert agents and all((s.attributes or {})["assistant.agent.status"] == "stopped" for s in agents)
