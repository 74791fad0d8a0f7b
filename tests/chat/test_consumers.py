"""The conversation websocket, through the real ASGI stack (session auth, origin check, routing)."""

from __future__ import annotations

import html
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from pytest_django import Settings

from assistant.asgi import application
from assistant.chat.consumers import CLOSE_NOT_FOUND, CLOSE_SIGN_IN
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution, groups, local
from assistant.runs.messages import RunEvent
from assistant.runs.models import Conversation, Run
from tests.chat.chat_support import ASK, PAGE_SECONDS, frames_until_finished, open_socket, signed_in
from tests.query_log import held_queries
from tests.sockets import text_from
from tests.waiting import until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]


async def _closed_with(communicator: WebsocketCommunicator) -> int | None:
    message: dict[str, Any] = await communicator.receive_output(timeout=PAGE_SECONDS)
    assert message["type"] == "websocket.close"
    code: int | None = message.get("code")
    return code


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
    communicator = await open_socket(f"/ws/c/{conversation.pk}/", session=None)
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
        _, session = await signed_in(username, f"{username}-password")
        communicator = await open_socket(f"/ws/c/{conversation.pk}/", session)
        try:
            assert await _closed_with(communicator) == CLOSE_NOT_FOUND
        finally:
            await communicator.disconnect()
    # A conversation that does not exist gets the same answer.
    _, session = await signed_in()
    communicator = await open_socket("/ws/c/999999/", session)
    try:
        assert await _closed_with(communicator) == CLOSE_NOT_FOUND
    finally:
        await communicator.disconnect()


async def test_another_origin_is_refused() -> None:
    await _demo()
    conversation = await sync_to_async(_conversation_of)("demo")
    _, session = await signed_in()
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
    _, session = await signed_in()
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
    _, session = await signed_in()
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
    _, session = await signed_in()
    for path in ("/ws/c/abc/", "/ws/c/", "/ws/", "/ws/c/1/extra/", "/nothing"):
        communicator = await open_socket(path, session)
        try:
            assert await _closed_with(communicator) == CLOSE_NOT_FOUND, path
        finally:
            await communicator.disconnect()


def _mentions(run_id: uuid.UUID) -> Callable[[str], bool]:
    """Whether a statement names the run (SQLite logs its id as hex, PostgreSQL as a UUID)."""
    return lambda sql: run_id.hex in sql or str(run_id) in sql


async def test_another_organisations_run_cannot_be_followed_through_its_id() -> None:
    await _demo()
    mine = await sync_to_async(_conversation_of)("demo")
    mallory = await sync_to_async(_member)("mallory", "other")
    theirs = await sync_to_async(_conversation_of)(mallory.username)
    secret = await Run.objects.acreate(
        conversation=theirs, organisation_id=theirs.organisation_id, user=mallory, model="demo-large"
    )
    _, session = await signed_in()
    said: RunEvent = {
        "type": "run.event",
        "run": secret.pk.hex,
        "seq": 0,
        "t": 1.0,
        "offset": 0,
        "event": {"kind": "text_delta", "agent_id": None, "text": "Mallory's secret"},
    }
    # What that run publishes while the page reads it (the page listens first, so as to miss nothing) is dropped: the
    # database is slow to answer the page's read of the run's question, and the run publishes meanwhile.
    reads_the_question = _mentions(secret.pk)
    with held_queries(lambda sql: 'FROM "chat_message"' in sql and reads_the_question(sql)) as reading:
        communicator = await open_socket(f"/ws/c/{mine.pk}/?running={secret.pk.hex},not-a-uuid", session)
        try:
            await until(reading.reached.is_set, "the page to read the run")
            await groups.publish(secret.pk, said)
            reading.release()
            await until(lambda: secret.pk.hex not in local._listeners, "the page to stop listening to the run")
            assert await communicator.receive_nothing(timeout=0.3)
            await groups.publish(secret.pk, said | {"offset": 16})  # and what it publishes after
            assert await communicator.receive_nothing(timeout=0.3)
        finally:
            await communicator.disconnect()


async def test_events_arrive_live_then_the_finished_run(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.002, 0.05
    await _demo()
    client, session = await signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    communicator = await open_socket(f"/ws/c/{conversation.pk}/?lang=en", session)
    try:
        response = await client.post(f"/c/{conversation.pk}/send", ASK, headers={"HX-Request": "true"})
        assert response.status_code == 200
        run = await Run.objects.aget(conversation=conversation)
        frames = await frames_until_finished(communicator, run)
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
    not after the run's outcome is read from the database (slow to answer here, until the text has arrived)."""
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.008, 0.05
    monkeypatch.setattr("assistant.chat.consumers.PUSH_INTERVAL", 1.0)
    await _demo()
    client, session = await signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    communicator = await open_socket(f"/ws/c/{conversation.pk}/?lang=en", session)
    ended = threading.Event()
    frames: list[str] = []

    async def until_received(what: str, done: Callable[[], bool]) -> None:
        async def received() -> bool:
            if not await communicator.receive_nothing(timeout=0.05):
                frames.append(await text_from(communicator))
            return done()

        await until(received, what)

    try:
        await client.post(f"/c/{conversation.pk}/send", ASK, headers={"HX-Request": "true"})
        run = await Run.objects.aget(conversation=conversation)
        names_the_run = _mentions(run.pk)

        heard: dict[int, str] = {}  # the answer's text, as the run publishes it: each piece at its offset

        def on_message(message: Any) -> None:
            event = message.get("event") or {}
            if event.get("kind") == "text_delta" and not event.get("agent_id"):
                heard[message["offset"]] = event["text"]
            if message["type"] == "run.finished":
                ended.set()

        local.listen(run.pk.hex, on_message)  # the run's messages, as the page hears them
        # Once the run has ended, the database answers the reads of its outcome only when the test says so.
        with held_queries(lambda sql: ended.is_set() and 'FROM "chat_run"' in sql and names_the_run(sql)) as outcome:
            await until(ended.is_set, "the run to end")
            answer = "".join(text for _offset, text in sorted(heard.items()))
            await until_received("its last words", lambda: _letters(answer)[-80:] in _letters("".join(frames)))
            before = list(frames)
            outcome.release()
            finished = re.compile(rf'<article class="answer" id="run-{run.pk}" data-status="ok"')
            await until_received("the finished run", lambda: bool(finished.search(frames[-1])) if frames else False)
        await execution.wait_for(run.pk)
        local.unlisten(run.pk.hex, on_message)
    finally:
        await communicator.disconnect()
    assert not any(finished.search(f) for f in before)  # the last words came before the end was read
    assert 'data-emitted="' not in frames[-1]  # no text of its own left for the finished run to bring
    await run.arefresh_from_db()
    assert run.status == "ok" and _letters(run.answer).endswith(_letters(answer)[-80:])


async def test_joining_mid_run_shows_what_happened_and_continues(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.004, 0.05
    await _demo()
    client, session = await signed_in()
    await client.post("/c/new", ASK)
    run = await Run.objects.aget()

    async def writing() -> bool:
        await run.arefresh_from_db()
        return len(run.answer) > 200

    await until(writing, "the answer to be written")
    assert run.is_running
    communicator = await open_socket(f"/ws/c/{run.conversation_id}/?running={run.pk.hex}", session)
    try:
        frames = await frames_until_finished(communicator, run)
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
    client, session = await signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    tabs = [await open_socket(f"/ws/c/{conversation.pk}/", session) for _ in range(2)]
    try:
        await client.post(f"/c/{conversation.pk}/send", ASK)
        run = await Run.objects.aget(conversation=conversation)
        for tab in tabs:
            frames = await frames_until_finished(tab, run)
            assert 'data-status="ok"' in frames[-1]
    finally:
        for tab in tabs:
            await tab.disconnect()
    # Closing every tab mid-run does not stop the run.
    await client.post(f"/c/{conversation.pk}/send", ASK)
    second = await Run.objects.filter(conversation=conversation).alatest("created")
    tab = await open_socket(f"/ws/c/{conversation.pk}/", session)
    await tab.receive_from(timeout=PAGE_SECONDS)
    await tab.disconnect()
    await execution.wait_for(second.pk)
    await second.arefresh_from_db()
    assert second.status == "ok"


async def test_stop_reaches_the_page(settings: Settings) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.0, 0.3
    await _demo()
    client, session = await signed_in()
    conversation = await sync_to_async(_conversation_of)("demo")
    communicator = await open_socket(f"/ws/c/{conversation.pk}/", session)
    try:
        await client.post(f"/c/{conversation.pk}/send", ASK)
        run = await Run.objects.aget(conversation=conversation)
        frame = ""
        while "(working…)" not in frame:
            frame = await text_from(communicator, timeout=PAGE_SECONDS)
        response = await client.post(f"/runs/{run.pk}/stop", headers={"HX-Request": "true"})
        assert "Stopping…" in response.content.decode()
        frames = await frames_until_finished(communicator, run)
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
