"""One timeline per run (each step's offset in the answer, recorded and drawn), the agent panel (its page and its
live pushes), and a run's lease asked whether its process lives (on reconnect and while followed)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import uuid
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.template.loader import render_to_string
from django.test import AsyncClient, Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation
from pytest_django import Settings

from assistant.asgi import application
from assistant.chat import consumers
from assistant.chat.presenters import run_view
from assistant.chat.timeline import TextPiece, WorkBlock
from assistant.engine.cancel import CancelToken
from assistant.engine.causes import Cause
from assistant.engine.events import Action, AgentAction, AgentStarted, TextDeltaEvent, ToolResultEvent, UsageEvent
from assistant.orgs.models import Membership, Organisation
from assistant.runs import leases, local
from assistant.runs.follow import Follower
from assistant.runs.groups import publish
from assistant.runs.messages import RunEvent, RunMessage
from assistant.runs.models import Conversation, Lease, Message, Run, Step
from assistant.runs.recorder import Recorder
from tests.database_thread import statements_of_the_database_thread
from tests.query_log import held_queries
from tests.shared_layer import use_shared_layer
from tests.sockets import text_from
from tests.waiting import until

INSTRUCTION = "Find the invoices of Bimbamjob"
FIRST = "I am handing the search to an agent."
ANSWER = " Here is the answer."
STARTED: dict[str, Any] = {
    "kind": "agent_started", "agent_id": "agent-1", "instruction": INSTRUCTION, "model": "demo-small",
    "model_label": "Demo Small (offline demo)", "resources": ["kb:factures"], "max_rounds": 5,
}  # fmt: skip


def _usage(cost: float) -> dict[str, Any]:
    return UsageEvent(
        agent_id="agent-1", model="demo-small", prompt_tokens=100, completion_tokens=10, cost_eur=cost
    ).model_dump(mode="json")


SEARCH: dict[str, Any] = {"tool": "kb_search", "kind": "search", "label": "factures: Bimbamjob", "count": 4, "ok": True}
READ: dict[str, Any] = {"tool": "kb_read", "kind": "read", "label": "Invoice F-2024-031", "count": 1, "ok": True}


def _event(message: RunMessage) -> RunEvent:
    """A message the run published, which the test expects to be one of its events."""
    assert message["type"] == "run.event", message
    return message


def _run(status: str = "running", answer: str = "", user: str = "demo") -> Run:
    owner = get_user_model().objects.get(username=user)
    org = Organisation.objects.get(slug="demo")
    conversation = Conversation.objects.create(organisation=org, user=owner, title="Bimbamjob?")
    run = Run.objects.create(
        conversation=conversation, organisation=org, user=owner, model="demo-large", status=status, answer=answer
    )
    Message.objects.create(conversation=conversation, role="user", content="Bimbamjob?", run=run)
    return run


def _steps(run: Run, offsets: bool = True, finished: bool = False) -> None:
    """The main model's first sentence, an agent (a round, a search, its cost so far), then the answer."""
    at = len(FIRST) if offsets else None
    steps = [
        Step(run=run, seq=1, kind="round_started", data={"round": 1, "model": "demo-large"}, text_offset=0 if offsets else None),
        Step(run=run, seq=2, kind="tool_call", data={"name": "agents"}, text_offset=at),
        Step(run=run, seq=3, kind="agent_started", agent_id="agent-1", data=STARTED, text_offset=at),
        Step(run=run, seq=4, kind="round_started", agent_id="agent-1", data={"round": 1, "model": "demo-small"}, text_offset=at),
        Step(run=run, seq=5, kind="usage", agent_id="agent-1", data=_usage(0.0007), text_offset=at),
        Step(run=run, seq=6, kind="agent_action", agent_id="agent-1", data={"kind": "agent_action", "agent_id": "agent-1", "action": SEARCH}, text_offset=at),
        Step(run=run, seq=7, kind="round_started", agent_id="agent-1", data={"round": 2, "model": "demo-small"}, text_offset=at),
        Step(run=run, seq=8, kind="usage", agent_id="agent-1", data=_usage(0.0005), text_offset=at),
    ]  # fmt: skip
    if finished:
        steps.append(
            Step(run=run, seq=9, kind="agent_finished", agent_id="agent-1", data={
                "kind": "agent_finished", "agent_id": "agent-1", "model": "demo-small", "status": "ok", "reason": "",
                "rounds": 2, "seconds": 1.5, "cost_eur": 0.0012, "usage": {}, "report": "Found [doc-1].", "forced_landing": False,
            }, text_offset=at),
        )  # fmt: skip
        steps.append(
            Step(
                run=run,
                seq=10,
                kind="tool_result",
                data={"kind": "tool_result", "call_id": "c1", "name": "agents", "ok": True},
                text_offset=at,
            )
        )
    Step.objects.bulk_create(steps)


# The recorder: each step's offset ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_first_words_reach_this_processs_listeners_in_the_emitters_call(demo_data: None) -> None:
    """The recorder hands the first delta of a burst to this process's listeners at once, the burst whole on the next
    turn of the loop; a follower takes each word once."""
    run = await sync_to_async(_run)()
    heard: list[RunEvent] = []

    def hear(message: RunMessage) -> None:
        heard.append(_event(message))

    local.listen(run.pk.hex, hear)
    recorder = Recorder(run.pk)
    try:
        await recorder.emit(TextDeltaEvent(text="Hello "))
        assert [(m["offset"], m["event"]["text"]) for m in heard] == [(0, "Hello ")]  # no turn of the loop yet
        await recorder.emit(TextDeltaEvent(text="world"))
        assert len(heard) == 1
        await recorder.close()
    finally:
        local.unlisten(run.pk.hex, hear)
    assert [(m["offset"], m["event"]["text"]) for m in heard] == [(0, "Hello "), (0, "Hello world")]
    follower = Follower(run.pk)
    assert [item for m in heard for item in follower.apply(m) or []] == ["Hello ", "world"]


@pytest.mark.django_db(transaction=True)
async def test_what_the_engine_asks_of_the_database_right_after_an_event_goes_before_the_events_write(
    demo_data: None,
) -> None:
    """The recorder writes a burst in one go, after what the engine does next (its search, its next hold) has reached
    the database's thread; the run's end (``close``) writes what is left without waiting."""
    run = await sync_to_async(_run)()

    def order(sent: CaptureQueriesContext) -> list[str]:
        """The steps' writes and the engine's search, in the order the database received them."""
        kinds = [("write", f'INSERT INTO "{Step._meta.db_table}"'), ("search", "SEARCH-MARK")]
        return [kind for q in sent.captured_queries for kind, mark in kinds if mark in q["sql"]]

    async with statements_of_the_database_thread() as sent:
        recorder = Recorder(run.pk)
        await recorder.emit(AgentStarted(**{k: v for k, v in STARTED.items() if k != "kind"}))
        await recorder.emit(AgentAction(agent_id="agent-1", action=Action(**SEARCH)))
        await asyncio.sleep(0.001)  # the engine reads the model's answer, then does what it says:
        await Run.objects.filter(pk=run.pk, answer="SEARCH-MARK").aexists()  # its next step, in the database's thread
        await until(lambda: "write" in order(sent), "the recorder's write")
        assert order(sent) == ["search", "write"]  # and one write for both events
        assert await Step.objects.filter(run=run).acount() == 2
        await recorder.emit(AgentAction(agent_id="agent-1", action=Action(**READ)))
        await recorder.close()
        assert order(sent) == ["search", "write", "write"]
    assert await Step.objects.filter(run=run).acount() == 3


@pytest.mark.django_db(transaction=True)
async def test_the_recorder_saves_and_publishes_where_each_step_falls_in_the_answer(demo_data: None) -> None:
    run = await sync_to_async(_run)()
    heard: asyncio.Queue[RunMessage] = asyncio.Queue()
    local.listen(run.pk.hex, heard.put_nowait)
    recorder = Recorder(run.pk)
    await recorder.emit(TextDeltaEvent(text="I am handing "))
    await recorder.emit(TextDeltaEvent(text="the search."))
    await recorder.emit(AgentStarted(**{k: v for k, v in STARTED.items() if k != "kind"}))
    await recorder.emit(AgentAction(agent_id="agent-1", action=Action(**SEARCH)))
    await recorder.emit(TextDeltaEvent(text=" Here"))
    await recorder.emit(ToolResultEvent(call_id="c1", name="kb_search", ok=True, action=Action(**SEARCH)))
    await recorder.close()
    steps = [(s.kind, s.text_offset) async for s in Step.objects.filter(run=run).order_by("seq")]
    assert steps == [("agent_started", 24), ("agent_action", 24), ("tool_result", 29)]
    published: list[RunEvent] = []
    while len([m for m in published if m["event"]["kind"] != "text_delta"]) < 3:
        published.append(_event(await asyncio.wait_for(heard.get(), 2)))
    local.unlisten(run.pk.hex, heard.put_nowait)
    assert [m["text_offset"] for m in published if m["event"]["kind"] != "text_delta"] == [24, 24, 29]
    await run.arefresh_from_db()
    assert run.answer == "I am handing the search. Here"


# The presenters: one timeline ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_timeline_puts_each_line_where_it_happened_in_the_text(demo_data: None) -> None:
    run = _run(answer=FIRST + ANSWER)
    _steps(run)
    Step.objects.create(
        run=run,
        seq=9,
        kind="tool_result",
        data={"kind": "tool_result", "call_id": "c2", "name": "kb_read", "ok": True, "action": READ},
        text_offset=999,
    )  # an offset past the text is drawn at its end
    view = run_view(run)
    timeline = view["timeline"]
    assert [type(item) for item in timeline] == [TextPiece, WorkBlock, TextPiece, WorkBlock]
    first, agents, second, read = timeline
    assert (first.start, first.end, str(first.html)) == (0, len(FIRST), f"<p>{FIRST}</p>\n")
    assert (second.start, second.end) == (len(FIRST), len(FIRST + ANSWER))
    assert [a.agent_id for a in agents.agents] == ["agent-1"] and agents.working
    assert read.entries == [("action", Action(**READ))] and read.offset == len(FIRST + ANSWER)
    assert view["answer_start"] == len(FIRST + ANSWER)
    html = render_to_string("chat/_run.html", {"view": view})
    # In the page: the first sentence, then the delegation line and the working line, then the read, then the answer.
    positions = [html.index(FIRST), html.index('class="delegation'), html.index("An agent is working")]
    positions += [html.index("Here is the answer."), html.index("Read: Invoice F-2024-031")]
    positions += [html.index(f'id="run-{run.pk}-answer"')]
    assert positions == sorted(positions)


@pytest.mark.django_db
def test_the_answer_is_the_last_piece_and_live_text_goes_into_it(demo_data: None) -> None:
    run = _run(status="ok", answer=FIRST + ANSWER)
    _steps(run, finished=True)
    view = run_view(run)
    assert [type(item) for item in view["timeline"]] == [TextPiece, WorkBlock]
    assert not view["timeline"][1].working
    assert str(view["answer_html"]()) == "<p>Here is the answer.</p>\n"
    html = render_to_string("chat/_run.html", {"view": view})
    assert html.index(FIRST) < html.index('class="delegation') < html.index("Here is the answer.")


@pytest.mark.django_db
def test_an_old_run_without_offsets_draws_its_lines_before_the_answer_as_before(demo_data: None) -> None:
    run = _run(status="ok", answer=FIRST + ANSWER)
    _steps(run, offsets=False, finished=True)
    view = run_view(run)
    assert [type(item) for item in view["timeline"]] == [WorkBlock]
    assert view["answer_start"] == 0
    html = render_to_string("chat/_run.html", {"view": view})
    assert html.index('class="delegation') < html.index(FIRST)


@pytest.mark.django_db
def test_a_delegation_line_shows_its_round_and_cost_as_it_runs(demo_data: None) -> None:
    run = _run(answer=FIRST)
    _steps(run)
    agent = run_view(run)["agents"][0]
    assert agent.running and agent.rounds == 2 and agent.cost_eur == pytest.approx(0.0012)
    # The search as the page words it: the query alone, the base by its name (saved as "factures: Bimbamjob").
    named = Action(**{**SEARCH, "label": "Bimbamjob", "where": "Invoices"})
    assert [(r.number, r.actions) for r in agent.rounds_log] == [(1, [named]), (2, [])]
    html = render_to_string("chat/_agent.html", {"view": run_view(run), "agent": agent})
    assert re.search(r'<span class="progress">round 2 of 5 · <span class="line-cost">0\.0012 €</span>', html)
    Step.objects.create(
        run=run, seq=9, kind="agent_finished", agent_id="agent-1", data={
            "agent_id": "agent-1", "model": "demo-small", "status": "ok", "reason": "", "rounds": 2, "seconds": 1.5,
            "cost_eur": 0.0013, "usage": {}, "report": "Found.", "forced_landing": False,
        },
    )  # fmt: skip
    agent = run_view(run)["agents"][0]
    assert agent.cost_eur == 0.0013  # once it returned, what it says it cost


# The agent panel's page ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_agent_panel_is_its_owners_only(demo_data: None) -> None:
    run = _run(answer=FIRST)
    _steps(run)
    path = f"/c/{run.conversation_id}/runs/{run.pk}/agents/agent-1/"
    owner = Client()
    assert owner.login(username="demo", password="demo-password")
    response = owner.get(path, headers={"HX-Request": "true"})  # the page's link (htmx)
    assert response.status_code == 200
    html = response.content.decode()
    assert '<aside id="agent-panel" class="agent-panel" aria-labelledby="agent-panel-title"' in html
    assert INSTRUCTION in html and "Searched “Bimbamjob” in Invoices: 4 results" in html and "Round 2" in html
    assert f'data-opener="follow-{run.pk}-agent-1"' in html
    assert 'data-status="running"' in html and "Waiting for the model…" in html
    french = owner.get(path, headers={"accept-language": "fr", "HX-Request": "true"})
    assert "Consigne" in french.content.decode() and "Tour 2" in french.content.decode()
    # Opened in a new tab (or without scripts): a page of its own, with the way back to its conversation.
    page = owner.get(path).content.decode()
    assert "<html" in page and '<aside id="agent-panel"' not in page and "Round 2" in page
    assert f'href="/c/{run.conversation_id}/#run-{run.pk}">Back to the conversation</a>' in page
    french_page = owner.get(path, headers={"accept-language": "fr"}).content.decode()
    assert "Retour à la conversation" in french_page and "Tour 2" in french_page
    assert owner.get(path.replace("agent-1", "agent-9")).status_code == 404
    assert owner.get(path.replace(str(run.pk), str(uuid.uuid4()))).status_code == 404
    assert owner.get(path.replace(f"/c/{run.conversation_id}/", f"/c/{run.conversation_id + 1}/")).status_code == 404
    assert Client().get(path).status_code == 302  # to sign in
    other = get_user_model().objects.create_user("other", password="other-password")
    Membership.objects.create(organisation=Organisation.objects.get(slug="demo"), user=other, role="member")
    stranger = Client()
    assert stranger.login(username="other", password="other-password")
    assert stranger.get(path).status_code == 404


# The lease: is the run's process alive? ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_runs_lease_says_whether_its_process_lives(demo_data: None, settings: Settings) -> None:
    settings.RUNS_LEASE_SECONDS = 30
    now = timezone.now()
    alive = _run()
    Lease.objects.create(run=alive, executor=leases.executor_name(), heartbeat=now)
    assert not leases.fail_if_dead(alive.pk, now) and Run.objects.get(pk=alive.pk).status == "running"
    expired = _run(answer="Partial")
    Lease.objects.create(run=expired, executor="elsewhere:1", heartbeat=now - timedelta(seconds=31))
    assert leases.fail_if_dead(expired.pk, now)
    expired.refresh_from_db()
    assert (expired.status, expired.error) == ("error", leases.DIED.english())
    assert Message.objects.filter(run=expired, role="assistant", content="Partial").exists()
    # Its server stopped (a process of this machine that is gone): dead at once, however fresh its lease.
    gone = subprocess.Popen(["true"])
    gone.wait()
    restarted = _run()
    Lease.objects.create(run=restarted, executor=f"{socket.gethostname()}:{gone.pid}", heartbeat=now)
    assert not leases.fail_if_dead(restarted.pk, now, conversation_id=restarted.conversation_id + 1)  # not that page's
    assert Run.objects.get(pk=restarted.pk).status == "running"
    assert leases.fail_if_dead(restarted.pk, now, conversation_id=restarted.conversation_id)
    assert Run.objects.get(pk=restarted.pk).status == "error"
    # Scaled out, only the lease's age counts (a worker's process is not this machine's to look at).
    settings.RUNS_EXECUTOR = "celery"
    other = _run()
    Lease.objects.create(run=other, executor=f"{socket.gethostname()}:{gone.pid}", heartbeat=now)
    assert not leases.fail_if_dead(other.pk, now)
    settings.RUNS_EXECUTOR = "embedded"
    # Never claimed: dead once it waited longer than a lease; a finished run is left alone.
    unclaimed = _run()
    assert not leases.fail_if_dead(unclaimed.pk, now)
    assert leases.fail_if_dead(unclaimed.pk, now + timedelta(seconds=31))
    assert Run.objects.get(pk=unclaimed.pk).error == leases.NOT_TAKEN.english()
    assert not leases.fail_if_dead(_run(status="ok").pk, now)


# The websocket: following one agent, and the runs' state on reconnect --------------------------------------


async def _socket(path: str) -> WebsocketCommunicator:
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _frames_until(communicator: WebsocketCommunicator, pattern: str, timeout: float = 60) -> str:
    frames = ""
    async with asyncio.timeout(timeout):
        while not re.search(pattern, frames, re.S):
            frames += await text_from(communicator, timeout=timeout)
    return frames


@pytest.fixture
def fast(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.RUNS_HEARTBEAT_SECONDS = 0.5


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "fast")
async def test_the_followed_agents_panel_is_pushed_with_each_of_its_steps() -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    run = await sync_to_async(_run)(answer=FIRST)
    await sync_to_async(_steps)(run)
    await Lease.objects.acreate(run=run, executor=leases.executor_name(), heartbeat=timezone.now())
    communicator = await _socket(f"/ws/c/{run.conversation_id}/?lang=en")
    body = f'id="agent-panel-body-{run.pk}-agent-1"'
    try:
        first = await _frames_until(communicator, f'id="run-{run.pk}-timeline"')
        assert body not in first  # no panel followed yet
        await communicator.send_to(json.dumps({"follow_agent": {"run": run.pk.hex, "agent": "agent-1"}}))
        frames = await _frames_until(communicator, body)
        assert "Searched “Bimbamjob” in Invoices: 4 results" in frames
        event = {"kind": "agent_action", "agent_id": "agent-1", "action": READ}
        message: RunEvent = {
            "type": "run.event",
            "run": run.pk.hex,
            "seq": 9,
            "event": event,
            "t": 1.0,
            "text_offset": 36,
        }
        await publish(run.pk, message)
        frames = await _frames_until(communicator, "Read: Invoice F-2024-031.*" + body + "|" + body + ".*Read: Invoice")
        assert frames.count(body) == 1  # the line and the panel, pushed together
        # Closed: the agent's next step changes its line only.
        await communicator.send_to(json.dumps({"follow_agent": None}))
        await communicator.send_to("not json")  # ignored
        event = _usage(0.001)
        await publish(run.pk, message | {"seq": 10, "event": event})
        frames = await _frames_until(communicator, r"0\.0022 €")
        assert body not in frames
    finally:
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "fast")
async def test_an_agents_progress_right_after_another_reaches_the_page_with_the_next_progress_push(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Agents' progress goes out at most once per ``PROGRESS_INTERVAL``: what comes in between waits, and is not lost;
    the answer's text does not wait."""
    monkeypatch.setattr(consumers, "PROGRESS_INTERVAL", 1.0)  # a wait no slow machine mistakes for none
    await sync_to_async(call_command)("load_demo", verbosity=0)
    run = await sync_to_async(_run)(answer=FIRST)
    await sync_to_async(_steps)(run)
    await Lease.objects.acreate(run=run, executor=leases.executor_name(), heartbeat=timezone.now())
    communicator = await _socket(f"/ws/c/{run.conversation_id}/?lang=en")
    try:
        await _frames_until(communicator, f'id="run-{run.pk}-timeline"')

        def message(seq: int, event: dict[str, Any]) -> RunEvent:
            return {
                "type": "run.event",
                "run": run.pk.hex,
                "seq": seq,
                "event": event,
                "t": 1.0,
                "text_offset": len(FIRST),
            }

        action = {"kind": "agent_action", "agent_id": "agent-1", "action": READ}
        await publish(run.pk, message(9, action))
        await _frames_until(communicator, "Read: Invoice F-2024-031")
        await publish(run.pk, message(10, _usage(0.001)))  # within the interval
        text = {"kind": "text_delta", "agent_id": None, "text": " Reading."}
        await publish(run.pk, message(10, text) | {"offset": len(FIRST)})
        first = await _frames_until(communicator, "Reading.")
        assert "0.0022 €" not in first  # the answer first, the progress with the next progress push
        await _frames_until(communicator, r"0\.0022 €", timeout=4)
    finally:
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "fast")
@pytest.mark.parametrize("in_process", [True, False], ids=["in-memory layer", "shared layer"])
async def test_what_a_run_publishes_while_the_page_reads_it_reaches_the_page_once(
    settings: Any, in_process: bool
) -> None:
    """The page listens, then reads the run: text published between the two is held and applied after the read. With
    a shared layer (runs executed elsewhere too) it also comes through the run's group, and is not shown twice."""
    if not in_process:
        use_shared_layer(settings)
    assert local.in_process() is in_process
    await sync_to_async(call_command)("load_demo", verbosity=0)
    run = await sync_to_async(_run)(answer=FIRST)
    await sync_to_async(_steps)(run)
    await Lease.objects.acreate(run=run, executor=leases.executor_name(), heartbeat=timezone.now())

    def message(event: dict[str, Any], offset: int) -> RunEvent:
        return {"type": "run.event", "run": run.pk.hex, "t": 1.0, "seq": 8, "offset": offset, "event": event}

    # The database is slow to answer the page's read of the run's question: the run publishes meanwhile.
    reads_the_question = ('FROM "chat_message"', run.pk.hex)
    with held_queries(lambda sql: all(part in sql for part in reads_the_question)) as reading:
        communicator = await _socket(f"/ws/c/{run.conversation_id}/?lang=en")
        try:
            await until(reading.reached.is_set, "the page to read the run")
            text = message({"kind": "text_delta", "agent_id": None, "text": " Meanwhile."}, len(FIRST))
            await publish(run.pk, text)  # before the page has what it read
            reading.release()
            await _frames_until(communicator, "Meanwhile.")
            after = message({"kind": "text_delta", "text": " After."}, len(FIRST + " Meanwhile."))
            await publish(run.pk, after)
            frames = await _frames_until(communicator, "After.")
            answers = re.findall(rf'id="run-{run.pk}-answer"[^>]*>(.*?)</div>', frames, re.S)
            assert answers and all(a.count("Meanwhile.") == 1 for a in answers)
        finally:
            await communicator.disconnect()
    assert run.pk.hex not in local._listeners


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "fast")
async def test_on_reconnect_a_run_whose_process_died_comes_back_failed(settings: Settings) -> None:
    settings.RUNS_LEASE_SECONDS = 30
    await sync_to_async(call_command)("load_demo", verbosity=0)
    run = await sync_to_async(_run)(answer=FIRST)
    await sync_to_async(_steps)(run)
    lease = await Lease.objects.acreate(run=run, executor=leases.executor_name(), heartbeat=timezone.now())
    communicator = await _socket(f"/ws/c/{run.conversation_id}/?lang=fr")
    finished = rf'<article class="answer" id="run-{run.pk}" data-status="error"'
    try:
        await _frames_until(communicator, f'id="run-{run.pk}-timeline"')
        await communicator.send_to(json.dumps({"state": [run.pk.hex]}))
        assert await communicator.receive_nothing(timeout=0.3)  # alive: nothing changes
        lease.heartbeat = timezone.now() - timedelta(seconds=60)  # its process stopped renewing it
        await lease.asave()
        await communicator.send_to(json.dumps({"state": [run.pk.hex, "not-a-run", 42]}))
        frames = await _frames_until(communicator, finished)
        assert "Le processus qui écrivait cette réponse s’est arrêté" in unescape(frames)  # its reason, in French
        assert "spinner" not in frames.split(finished)[-1]
        assert 'class="stop"' not in frames.split(finished)[-1]
    finally:
        await communicator.disconnect()
    await run.arefresh_from_db()
    assert run.status == "error"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "fast")
async def test_while_followed_a_runs_lease_is_checked_every_heartbeat(settings: Settings) -> None:
    settings.RUNS_LEASE_SECONDS = 1
    await sync_to_async(call_command)("load_demo", verbosity=0)
    run = await sync_to_async(_run)(answer=FIRST)
    await Lease.objects.acreate(run=run, executor="elsewhere:1", heartbeat=timezone.now())
    communicator = await _socket(f"/ws/c/{run.conversation_id}/")
    try:
        await _frames_until(communicator, rf'<article class="answer" id="run-{run.pk}" data-status="error"', 10)
    finally:
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "fast")
async def test_a_run_this_process_executes_is_not_looked_up_at_each_heartbeat(settings: Settings) -> None:
    """Its watch is open in this event loop: the process lives. A run of another process is still looked up."""
    settings.RUNS_HEARTBEAT_SECONDS = 0.5
    await sync_to_async(call_command)("load_demo", verbosity=0)
    here = await sync_to_async(_run)(answer=FIRST)
    elsewhere = await sync_to_async(_run)(answer=FIRST)
    await Lease.objects.acreate(run=here, executor=leases.executor_name(), heartbeat=timezone.now())
    await Lease.objects.acreate(run=elsewhere, executor="elsewhere:1", heartbeat=timezone.now())
    watch = leases.Watch(here.pk, CancelToken())
    await watch.start(flag_read=True)

    def lookups(sent: CaptureQueriesContext, run: Run) -> int:
        """The reads of ``run``'s lease (``leases.fail_if_dead``: its heartbeat and executor)."""
        return sum(
            q["sql"].startswith("SELECT")
            and '"executor"' in q["sql"]
            and (run.pk.hex in q["sql"] or str(run.pk) in q["sql"])
            for q in sent.captured_queries
        )

    async with statements_of_the_database_thread() as sent:
        pages = [await _socket(f"/ws/c/{run.conversation_id}/") for run in (here, elsewhere)]
        try:
            # As it is followed, then at each heartbeat (a page checks every 0.5 s at most).
            await until(lambda: lookups(sent, elsewhere) >= 3, "three lookups of the other process's run")
        finally:
            for page in pages:
                await page.disconnect()
            await watch.close()
    assert lookups(sent, here) == 0


@pytest.mark.django_db
def test_a_dead_runs_reason_is_worded_in_the_readers_language(demo_data: None) -> None:
    run = _run()
    leases.abandon(run, leases.DIED, timezone.now())  # as the reaper fails it: a last error step with its cause
    run.refresh_from_db()
    with translation.override("fr"):
        html = unescape(render_to_string("chat/_run.html", {"view": run_view(run)}))
    assert "Le processus qui écrivait cette réponse s’est arrêté de façon inattendue" in html
    assert leases.DIED.english() not in html  # the cause is worded, not its English record
    assert 'class="stop"' not in html and "spinner" not in html
    other = _run()
    leases.abandon(other, Cause(code="unexpected"), timezone.now())
    other.refresh_from_db()
    with translation.override("fr"):
        html = unescape(render_to_string("chat/_run.html", {"view": run_view(other)}))
    assert "L’assistant a échoué de façon inattendue" in html


@pytest.mark.django_db
def test_the_panel_words_each_kind_of_action_in_both_languages(demo_data: None) -> None:
    run = _run(answer=FIRST)
    _steps(run)
    actions = [
        {"tool": "web_fetch", "kind": "fetch", "label": "https://example.org/a", "ok": True},
        {"tool": "run_code", "kind": "code", "label": "print(sum(totals))", "ok": True},
        {"tool": "mcp_crm__search", "kind": "other", "label": "crm: search “Acme”", "ok": True},
    ]
    Step.objects.bulk_create(
        Step(run=run, seq=9 + i, kind="agent_action", agent_id="agent-1", data={"action": a}, text_offset=len(FIRST))
        for i, a in enumerate(actions)
    )
    view = run_view(run)
    agent = view["agents"][0]
    assert [a.kind for a in agent.rounds_log[-1].actions] == ["fetch", "code", "other"]  # in round 2, in order
    html = unescape(render_to_string("chat/_agent_panel_body.html", {"view": view, "agent": agent}))
    for text in (
        "Searched “Bimbamjob” in Invoices: 4 results",
        "Fetch: https://example.org/a",
        "Code: print(sum(totals))",
    ):
        assert text in html
    assert "crm: search “Acme”" in html
    with translation.override("fr"):
        html = unescape(render_to_string("chat/_agent_panel_body.html", {"view": view, "agent": agent}))
    assert "Lecture de la page : https://example.org/a" in html and "Code : print(sum(totals))" in html
    assert "Tour 1" in html and "0,0012 € jusqu’ici" in html
