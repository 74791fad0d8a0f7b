"""The conversation websocket, through the real ASGI stack (session auth, origin check, routing)."""

from __future__ import annotations

import asyncio
import html
import re
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import AsyncClient
from pytest_django import Settings

from assistant.asgi import application
from assistant.chat import live
from assistant.chat.consumers import CLOSE_NOT_FOUND, CLOSE_SIGN_IN
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution, groups, local
from assistant.runs.messages import RunEvent, RunFinished
from assistant.runs.models import Conversation, Run
from tests.chat.chat_support import ASK
from tests.sockets import text_from

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]


async def _signed_in(username: str = "demo", password: str = "demo-password") -> tuple[AsyncClient, str]:
    client = AsyncClient()
    assert await client.alogin(username=username, password=password)
    return client, client.cookies["sessionid"].value


async def _socket(path: str, session: str | None, origin: str = "http://testserver") -> WebsocketCommunicator:
    headers = [(b"origin", origin.encode()), (b"host", b"testserver")]
    if session is not None:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _closed_with(communicator: WebsocketCommunicator) -> int | None:
    message: dict[str, Any] = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close"
    code: int | None = message.get("code")
    return code


async def _until_finished(communicator: WebsocketCommunicator, run: Run, timeout: float = 20) -> list[str]:
    """Every frame received until the finished run arrives (its article, not running any more)."""
    frames: list[str] = []
    finished = re.compile(rf'<article class="answer" id="run-{run.pk}" data-status="(ok|stopped|error)"')
    async with asyncio.timeout(timeout):
        while True:
            frame = await text_from(communicator, timeout=timeout)
            frames.append(frame)
            if finished.search(frame):
                return frames


def _letters(fragment: str) -> str:
    """The visible letters and digits of a fragment: what streamed text must keep in order."""
    return re.sub(r"[^0-9A-Za-z]", "", html.unescape(re.sub(r"<[^>]+>", "", fragment)))


def _pushed_text(joined: str, run: Run) -> list[tuple[int, str]]:
    """Each pushed answer so far: where its piece of text starts in the answer, and its HTML."""
    found = re.findall(
        rf'<div class="text segment" id="run-{run.pk}-answer" data-offset="(\d+)"[^>]*>(.*?)</div>\s*$',
        joined,
        re.S | re.M,
    )
    return [(int(offset), text) for offset, text in found]


async def _demo() -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)


async def test_not_signed_in_is_closed() -> None:
    await _demo()
    conversation = await sync_to_async(_conversation_of)("demo")
    communicator = await _socket(f"/ws/c/{conversation.pk}/", session=None)
    try:
        assert await _closed_with(communicator) == CLOSE_SIGN_IN
    finally:
        await communicator.disconnect()


async def test_another_organisation_or_user_gets_not_found() -> None:
    await _demo()
    conversation = await sync_to_async(_conversation_of)("demo")
    await sync_to_async(_member)("mallory", "other")  # another organisation
    await sync_to_async(_member)("colleague", "demo")  # the same organisation, another user
    for username in ("mallory", "colleague"):
        _, session = await _signed_in(username, f"{username}-password")
        communicator = await _socket(f"/ws/c/{conversation.pk}/", session)
        try:
            assert await _closed_with(communicator) == CLOSE_NOT_FOUND
        finally:
            await communicator.disconnect()
    # A conversation that does not exist gets the same answer.
    _, session = await _signed_in()
    communicator = await _socket("/ws/c/999999/", session)
    try:
        assert await _closed_with(communicator) == CLOSE_NOT_FOUND
    finally:
        await communicator.disconnect()


async def test_another_origin_is_refused() -> None:
    await _demo()
    conversation = await sync_to_async(_conversation_of)("demo")
    _, session = await _signed_in()
    communicator = WebsocketCommunicator(
        application,
        f"/ws/c/{conversation.pk}/",
        headers=[
            (b"origin", b"http://evil.example"),
            (b"host", b"testserver"),
            (b"cookie", f"sessionid={session}".encode()),
        ],
    )
    connected, _ = await communicator.connect()
    try:
        assert not connected
    finally:
        await communicator.disconnect()


async def _handshake(path: str, session: str, origin: str, host: str = "testserver", scheme: str | None = None) -> bool:
    headers = [(b"origin", origin.encode()), (b"host", host.encode()), (b"cookie", f"sessionid={session}".encode())]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    if scheme is not None:
        communicator.scope["scheme"] = scheme
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return bool(connected)


async def test_the_origin_must_be_the_pages_own_scheme_host_and_port(settings: Settings) -> None:
    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
    await _demo()
    path = f"/ws/c/{(await sync_to_async(_conversation_of)('demo')).pk}/"
    _, session = await _signed_in()
    # A server on 127.0.0.1:8000: its own pages, with or without the default port spelled out.
    assert await _handshake(path, session, "http://127.0.0.1:8000", host="127.0.0.1:8000")
    assert await _handshake(path, session, "http://testserver:80", host="testserver")
    assert await _handshake(path, session, "https://testserver", host="testserver", scheme="wss")
    # Another port of the same host (another service on this machine), another scheme, another host.
    assert not await _handshake(path, session, "http://127.0.0.1:9999", host="127.0.0.1:8000")
    assert not await _handshake(path, session, "http://127.0.0.1", host="127.0.0.1:8000")
    assert not await _handshake(path, session, "https://127.0.0.1:8000", host="127.0.0.1:8000")
    assert not await _handshake(path, session, "http://testserver", host="testserver", scheme="wss")
    assert not await _handshake(path, session, "http://localhost:8000", host="127.0.0.1:8000")
    # A host this server does not serve (DNS rebinding) is refused even when Origin and Host agree.
    assert not await _handshake(path, session, "http://evil.example:8000", host="evil.example:8000")
    # No origin, or one that is not an origin.
    for origin in ("", "null", "file://", "http://testserver/page", "javascript:1"):
        assert not await _handshake(path, session, origin), origin


async def test_behind_a_tls_proxy_the_forwarded_scheme_counts_and_trusted_origins_are_accepted(
    settings: Settings,
) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.org", "https://*.example.net"]
    await _demo()
    path = f"/ws/c/{(await sync_to_async(_conversation_of)('demo')).pk}/"
    _, session = await _signed_in()
    forwarded = [(b"x-forwarded-proto", b"https")]

    async def through_proxy(origin: str) -> bool:
        headers = [(b"origin", origin.encode()), (b"host", b"testserver"), (b"cookie", f"sessionid={session}".encode())]
        communicator = WebsocketCommunicator(application, path, headers=headers + forwarded)
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return bool(connected)

    assert await through_proxy("https://testserver")
    assert not await through_proxy("http://testserver")
    assert await _handshake(path, session, "https://chat.example.org")
    assert await _handshake(path, session, "https://a.example.net")
    assert not await _handshake(path, session, "http://chat.example.org")
    assert not await _handshake(path, session, "https://chat.example.org:8443")
    assert not await _handshake(path, session, "https://example.org")


async def test_a_path_that_does_not_parse_is_closed_with_a_code_not_a_500() -> None:
    await _demo()
    _, session = await _signed_in()
    for path in ("/ws/c/abc/", "/ws/c/", "/ws/", "/ws/c/1/extra/", "/nothing"):
        communicator = await _socket(path, session)
        try:
            assert await _closed_with(communicator) == CLOSE_NOT_FOUND, path
        finally:
            await communicator.disconnect()


async def test_another_organisations_run_cannot_be_followed_through_its_id(monkeypatch: pytest.MonkeyPatch) -> None:
    await _demo()
    mine = await sync_to_async(_conversation_of)("demo")
    mallory = await sync_to_async(_member)("mallory", "other")
    theirs = await sync_to_async(_conversation_of)(mallory.username)
    secret = await Run.objects.acreate(
        conversation=theirs, organisation_id=theirs.organisation_id, user=mallory, model="demo-large"
    )
    _, session = await _signed_in()
    # What that run publishes while the page reads it (the page listens first, so as to miss nothing) is dropped.
    loop = asyncio.get_running_loop()
    load = live.LiveRun.load
    said: RunEvent = {
        "type": "run.event",
        "run": secret.pk.hex,
        "seq": 0,
        "t": 1.0,
        "offset": 0,
        "event": {"kind": "text_delta", "agent_id": None, "text": "Mallory's secret"},
    }

    def load_while_it_publishes(run_id: str, conversation_id: int, language: str | None = None) -> live.LiveRun | None:
        asyncio.run_coroutine_threadsafe(groups.publish(secret.pk, said), loop).result(5)
        return load(run_id, conversation_id, language)

    monkeypatch.setattr(live.LiveRun, "load", staticmethod(load_while_it_publishes))
    communicator = await _socket(f"/ws/c/{mine.pk}/?running={secret.pk.hex},not-a-uuid", session)
    try:
        assert await communicator.receive_nothing(timeout=0.3)
        await groups.publish(secret.pk, said | {"offset": 16})  # and what it publishes after
        assert await communicator.receive_nothing(timeout=0.3)
    finally:
        await communicator.disconnect()
    assert secret.pk.hex not in local._listeners


async def test_events_arrive_live_then_the_finished_run(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.002, 0.05
    await _demo()
    client, session = await _signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    communicator = await _socket(f"/ws/c/{conversation.pk}/?lang=en", session)
    try:
        response = await client.post(f"/c/{conversation.pk}/send", ASK, headers={"HX-Request": "true"})
        assert response.status_code == 200
        run = await Run.objects.aget(conversation=conversation)
        frames = await _until_finished(communicator, run)
        await execution.wait_for(run.pk)
    finally:
        await communicator.disconnect()
    await run.arefresh_from_db()
    assert run.status == "ok"
    # The new turn first (the socket announces runs started in this tab or another one), then live parts.
    assert f'hx-swap-oob="beforeend:#messages"><section class="turn" id="turn-{run.pk}"' in frames[0]
    joined = "".join(frames[:-1])
    assert f'id="run-{run.pk}-timeline"' in joined and f'id="run-{run.pk}-answer"' in joined
    assert 'Delegated to an agent (demo-small): "<span class="instruction">Find in your knowledge base what' in joined
    assert "(working…)" in joined
    assert "An agent is working; waiting for its answer to continue" in joined
    assert "Searched “" in joined and "factures:" not in joined  # an agent's action, by its base's name
    # Text arrives in order, never twice: each pushed piece of text is, from where it starts, the saved answer.
    answers = _pushed_text(joined, run)
    assert len(answers) > 1
    for offset, pushed in answers:
        assert _letters(run.answer[offset:]).startswith(_letters(pushed))
    # The timeline of the final run: the first sentence, then the delegation lines, then the answer.
    timeline = frames[-1]
    first, lines, answer = (
        timeline.index("I am handing the search"),
        timeline.index('class="delegation'),
        timeline.index("Here is what the documents say"),
    )
    assert first < lines < answer
    assert "returned in 3 rounds" in frames[-1] and "Cost: " in frames[-1]


async def test_a_runs_last_words_reach_the_page_before_its_end_is_read_from_the_database(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last text of a run comes with its end, within one push interval (made long here): it goes out at once,
    not after the run's outcome is read through the database's thread (held here until the text has arrived)."""
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.008, 0.05
    monkeypatch.setattr("assistant.chat.consumers.PUSH_INTERVAL", 1.0)
    reading = threading.Event()
    release = threading.Event()
    refresh = live.LiveRun.refresh_finished

    def held_refresh(self: live.LiveRun, finished: RunFinished | None = None) -> None:
        reading.set()
        release.wait(timeout=20)
        refresh(self, finished)

    monkeypatch.setattr(live.LiveRun, "refresh_finished", held_refresh)
    await _demo()
    client, session = await _signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    communicator = await _socket(f"/ws/c/{conversation.pk}/?lang=en", session)
    try:
        await client.post(f"/c/{conversation.pk}/send", ASK, headers={"HX-Request": "true"})
        run = await Run.objects.aget(conversation=conversation)
        # Nothing through the database's thread until released: the held read occupies it.
        assert await asyncio.to_thread(reading.wait, 20)
        before: list[str] = []
        while not await communicator.receive_nothing(timeout=1):  # what the page has while its end is being read
            before.append(await text_from(communicator))
        release.set()
        frames = await _until_finished(communicator, run)
        await execution.wait_for(run.pk)
        await run.arefresh_from_db()
    finally:
        release.set()
        await communicator.disconnect()
    assert _letters(run.answer)[-80:] in _letters("".join(before))  # up to the last word
    assert 'data-emitted="' not in frames[-1]  # no text of its own left for the finished run to bring


async def test_joining_mid_run_shows_what_happened_and_continues(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.004, 0.05
    await _demo()
    client, session = await _signed_in()
    await client.post("/c/new", ASK)
    run = await Run.objects.aget()
    for _ in range(200):  # until the answer is being written
        await run.arefresh_from_db()
        if len(run.answer) > 200:
            break
        await asyncio.sleep(0.02)
    assert run.is_running
    communicator = await _socket(f"/ws/c/{run.conversation_id}/?running={run.pk.hex}", session)
    try:
        frames = await _until_finished(communicator, run)
    finally:
        await communicator.disconnect()
    await execution.wait_for(run.pk)
    # The first push is the state so far: both agents back, and the answer up to now.
    first = frames[0]
    assert set(re.findall(r'<div class="delegation status-ok" id="agent-[^"]+-(agent-\d)"', first)) == {
        "agent-1",
        "agent-2",
    }
    assert "I am handing the search" in first
    await run.arefresh_from_db()
    for offset, pushed in _pushed_text("".join(frames[:-1]), run):
        assert _letters(run.answer[offset:]).startswith(_letters(pushed))


async def test_two_tabs_both_update_and_a_run_goes_on_without_any(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.001, 0.05
    await _demo()
    client, session = await _signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    tabs = [await _socket(f"/ws/c/{conversation.pk}/", session) for _ in range(2)]
    try:
        await client.post(f"/c/{conversation.pk}/send", ASK)
        run = await Run.objects.aget(conversation=conversation)
        for tab in tabs:
            frames = await _until_finished(tab, run)
            assert 'data-status="ok"' in frames[-1]
    finally:
        for tab in tabs:
            await tab.disconnect()
    # Closing every tab mid-run does not stop the run.
    await client.post(f"/c/{conversation.pk}/send", ASK)
    second = await Run.objects.filter(conversation=conversation).alatest("created")
    tab = await _socket(f"/ws/c/{conversation.pk}/", session)
    await tab.receive_from(timeout=5)
    await tab.disconnect()
    await execution.wait_for(second.pk)
    await second.arefresh_from_db()
    assert second.status == "ok"


async def test_stop_reaches_the_page(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.0, 0.3
    await _demo()
    client, session = await _signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    communicator = await _socket(f"/ws/c/{conversation.pk}/", session)
    try:
        await client.post(f"/c/{conversation.pk}/send", ASK)
        run = await Run.objects.aget(conversation=conversation)
        frame = ""
        while "(working…)" not in frame:
            frame = await text_from(communicator, timeout=5)
        response = await client.post(f"/runs/{run.pk}/stop", headers={"HX-Request": "true"})
        assert "Stopping…" in response.content.decode()
        frames = await _until_finished(communicator, run)
    finally:
        await communicator.disconnect()
    await execution.wait_for(run.pk)
    final = frames[-1]
    assert 'data-status="stopped"' in final
    assert final.count('data-status="stopped"') == 3  # the run and its two agents
    assert "stopped on request" in final
    assert "I am handing the search" in final  # the partial answer is kept


def _conversation_of(username: str) -> Conversation:
    user = get_user_model().objects.get(username=username)
    org = Organisation.objects.get(memberships__user=user)
    return Conversation.objects.create(organisation=org, user=user, title="A conversation")


def _member(username: str, org_slug: str) -> Any:
    org, _ = Organisation.objects.get_or_create(slug=org_slug, defaults={"name": org_slug.title()})
    user = get_user_model().objects.create_user(username, password=f"{username}-password")
    Membership.objects.create(organisation=org, user=user)
    return user
