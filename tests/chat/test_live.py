"""What the pages and the live pushes show: fragments, catch-up without gaps or repeats, wording in
both languages, statuses, errors in plain words, and text from models or documents kept as text."""

from __future__ import annotations

import gettext
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.test import Client
from django.utils import translation
from django.utils.html import escape

from assistant.catalogue import snapshot
from assistant.chat import live
from assistant.chat.agent_views import REPORT_PREVIEW_CHARS
from assistant.chat.presenters import agent_of, run_view
from assistant.chat.rendering import StreamingMarkdown, render_markdown
from assistant.engine.causes import Cause
from assistant.engine.errors import ModelUnavailable
from assistant.engine.events import (
    Action,
    AgentAction,
    AgentFinished,
    AgentStarted,
    AgentStatus,
    Event,
    ReasoningEvent,
    ToolResultEvent,
    UsageEvent,
)
from assistant.engine.models.function import FunctionModel
from assistant.engine.types import ModelRequest, ModelResponse
from assistant.orgs.models import Organisation
from assistant.runs import follow
from assistant.runs.messages import RunEvent
from assistant.runs.models import Conversation, Message, Run, Step
from assistant.runs.steps import save_event
from tests.refusing import refused_inserts

ASK = {"text": "Bimbamjob?", "model": "demo-large", "level": "approfondi", "resources": ["kb:factures", "agents"]}
INSTRUCTION = "Find the invoices of Bimbamjob"


@pytest.fixture
def client(demo_data: None) -> Client:
    client = Client()
    assert client.login(username="demo", password="demo-password")
    return client


def _run(status: str = "running", answer: str = "", **fields: Any) -> Run:
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    conversation = Conversation.objects.create(organisation=org, user=user, title="Bimbamjob?")
    run = Run.objects.create(
        conversation=conversation,
        organisation=org,
        user=user,
        model="demo-large",
        status=status,
        answer=answer,
        **fields,
    )
    Message.objects.create(conversation=conversation, role="user", content="Bimbamjob?", run=run)
    return run


SPAN = '<span class="instruction">'


def _agent_steps(
    run: Run, status: AgentStatus | None, cause: Cause | None = None, report: str = "Found [doc-1]."
) -> list[Step]:
    steps = [
        Step(run=run, seq=1, kind="agent_started", agent_id="agent-1", data={
            "agent_id": "agent-1", "instruction": INSTRUCTION, "model": "demo-small", "model_label": "Demo Small (offline demo)",
            "resources": ["kb:factures"], "max_rounds": 5,
        }),
        Step(run=run, seq=2, kind="round_started", agent_id="agent-1", data={"round": 1, "model": "demo-small"}),
        Step(run=run, seq=3, kind="agent_action", agent_id="agent-1", data={
            "action": {"tool": "kb_search", "kind": "search", "label": "factures: Bimbamjob", "count": 4, "ok": True},
        }),
        Step(run=run, seq=4, kind="agent_action", agent_id="agent-1", data={
            "action": {"tool": "kb_read", "kind": "read", "label": "Invoice F-2024-031 — Bimbamjob", "count": 1, "ok": True},
        }),
    ]  # fmt: skip
    if status is not None:
        steps.append(
            Step(run=run, seq=5, kind="agent_finished", agent_id="agent-1", data=save_event(AgentFinished(
                agent_id="agent-1", model="demo-small", status=status, reason=cause.english() if cause else "",
                cause=cause, rounds=2, seconds=1.5, cost_eur=0.0012, report=report,
            )))
        )  # fmt: skip
    Step.objects.bulk_create(steps)
    return steps


# The page --------------------------------------------------------------------------------------


def test_composer_offers_only_allowed_models_levels_and_resources(client: Client) -> None:
    Organisation.objects.filter(slug="demo").update(allowed_models=["demo-small"])
    page = client.get("/").content.decode()
    assert '<option value="demo-small"' in page and 'value="demo-large"' not in page
    for level in ("Rapide", "Standard", "Approfondi", "Maximal"):
        assert f">{level}</option>" in page
    for kb in ("factures", "comptes-rendus", "contrats"):
        assert f'value="kb:{kb}"' in page
    assert 'value="agents"' in page
    # Web and code tools are not configured here: shown, disabled, with a hint.
    assert re.search(r'value="web" disabled>', page) and re.search(r'value="code" disabled>', page)
    assert "not configured on this server" in page
    # htmx 2 and its ws extension, as django-htmx ships them.
    assert "django_htmx/htmx-2.min.js" in page and "django_htmx/ext/hx-ws-2.min.js" in page


def test_a_model_the_organisation_does_not_allow_is_refused_in_plain_words(client: Client) -> None:
    Organisation.objects.filter(slug="demo").update(allowed_models=["demo-small"])
    response = client.post("/c/new", ASK, headers={"HX-Request": "true"})
    assert response.status_code == 422
    body = response.content.decode()
    assert "is not allowed here. Allowed models: demo-small." in body
    assert body.lstrip().startswith('<form id="composer"')  # htmx swaps the composer only
    assert "Bimbamjob?</textarea>" in body  # the typed message is kept
    assert not Run.objects.exists()


def test_a_message_of_nul_characters_is_no_message(client: Client) -> None:
    # NUL is no text (PostgreSQL refuses it in a text column, which would fail the request): it is dropped.
    response = client.post("/c/new", {**ASK, "text": "\x00 \x00"}, headers={"HX-Request": "true"})
    assert response.status_code == 422 and "Write a message first." in response.content.decode()
    assert not Run.objects.exists()


def test_an_unexpected_failure_is_said_in_plain_words_and_keeps_the_message(client: Client) -> None:
    with refused_inserts(Run, "database on fire"):  # the database fails the run's insert, as a full disk would
        response = client.post("/c/new", ASK, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 503
    assert "could not start this request; your message is kept" in body
    assert "Bimbamjob?</textarea>" in body
    assert "Traceback" not in body and "database on fire" not in body
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_sending_with_htmx_returns_an_empty_composer_and_the_new_turn(fast_demo: None) -> None:
    from asgiref.sync import sync_to_async
    from django.core.management import call_command
    from django.test import AsyncClient

    from assistant.runs import execution

    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    response = await client.post("/c/new", ASK, headers={"HX-Request": "true"})
    conversation = await Conversation.objects.aget()
    assert response.status_code == 200 and response["HX-Redirect"] == f"/c/{conversation.pk}/"
    await execution.wait_for((await Run.objects.alatest("created")).pk)  # sent during a run, it would be queued
    response = await client.post(
        f"/c/{conversation.pk}/send", {**ASK, "text": "And Tamaris?"}, headers={"HX-Request": "true"}
    )
    body = response.content.decode()
    run = await Run.objects.alatest("created")
    assert body.lstrip().startswith('<form id="composer"')
    assert "></textarea>" in body  # emptied, the other settings kept
    assert f'<div hx-swap-oob="beforeend:#messages"><section class="turn" id="turn-{run.pk}"' in body
    assert "And Tamaris?" in body and f'id="stop-{run.pk}"' in body
    async for each in Run.objects.all():
        await execution.wait_for(each.pk)


def test_a_running_page_subscribes_with_the_runs_it_shows(client: Client) -> None:
    run = _run()
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert f'hx-ext="ws" ws-connect="/ws/c/{run.conversation_id}/?lang=en&amp;running={run.pk.hex}"' in page
    assert f'id="stop-{run.pk}"' in page
    assert 'http-equiv="refresh"' not in page


def test_delegation_lines_and_panel_in_english(client: Client) -> None:
    run = _run(
        status="ok",
        answer="Done [doc-1].",
        usage={
            "cost_eur": 0.01,
            "by_model": {"demo-small": {"prompt_tokens": 900, "completion_tokens": 40, "cached_prompt_tokens": 128}},
        },
        cost_eur=0.01,
    )
    _agent_steps(run, "ok")
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    # The instruction, the main model's words, in its own element inside the translated line.
    assert f'Delegated to an agent (demo-small): "{SPAN}{INSTRUCTION}</span>" (returned in 2 rounds)' in page
    for shown in ("Demo Small (offline demo)", "2 / 5", "1.5 s", "kb:factures", "0.0012 €",
                  "Searched “Bimbamjob” in Invoices: 4 results", "Read: Invoice F-2024-031 — Bimbamjob", "Found [doc-1]."):  # fmt: skip
        assert shown in page
    assert "Cost: 0.0100 €" in page and "demo-small: 900 tokens in (128 cached), 40 out" in page


def test_delegation_lines_in_french(client: Client) -> None:
    client.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    running = _run()
    _agent_steps(running, None)
    page = client.get(f"/c/{running.conversation_id}/").content.decode()
    assert f"Délégation à un agent (demo-small) : « {SPAN}{INSTRUCTION}</span> » (en cours…)" in page
    assert "Un agent travaille, en attente de sa réponse pour continuer" in page
    assert "Recherche de « Bimbamjob » dans Factures : 4 résultats" in page  # live, without opening the panel
    assert "Arrêter" in page and "Nouvelle conversation" in page

    done = _run(status="ok", answer="Fait.")
    _agent_steps(done, "ok")
    page = client.get(f"/c/{done.conversation_id}/").content.decode()
    assert f"Délégation à un agent (demo-small) : « {SPAN}{INSTRUCTION}</span> » (revenu en 2 tours)" in page
    assert "Un agent travaille" not in page
    assert "0,0012 €" in page  # numbers as French readers write them
    assert ">English</button>" in page and ">Français</button>" in page  # each language in its own name


def test_the_browser_language_is_the_default() -> None:
    with translation.override("fr"):
        assert translation.gettext("An agent is working; waiting for its answer to continue") == (
            "Un agent travaille, en attente de sa réponse pour continuer"
        )


def test_french_from_the_browser(client: Client) -> None:
    page = client.get("/", headers={"Accept-Language": "fr-FR,fr;q=0.9"}).content.decode()
    assert "Nouvelle conversation" in page and '<html lang="fr">' in page


@pytest.mark.parametrize(
    ("status", "cause", "shown", "shown_fr"),
    [
        ("ok", None, "ok", "terminé"),
        (
            "interrupted",
            Cause(code="rounds", used=5, limit=5),
            "interrupted: round budget reached (5/5 rounds)",
            "interrompu : budget de tours atteint (5/5 tours)",
        ),
        (
            "interrupted",
            Cause(code="tokens", used=61_234, limit=60_000),
            "interrupted: token budget reached (61,234/60,000 tokens)",
            "interrompu : budget de jetons atteint (61\u00a0234/60\u00a0000 jetons)",
        ),
        ("stopped", Cause(code="stopped_by_user"), "stopped on request", "arrêté à la demande"),
        (
            "stopped",
            Cause(code="category_budget"),
            "stopped: the category's monthly budget is reached",
            "arrêté : le budget mensuel de la catégorie est atteint",
        ),
        (
            "error",
            Cause(code="model_error", kind="timeout"),
            "error: the model did not answer in time",
            "erreur : le modèle n’a pas répondu à temps",
        ),
    ],
)
def test_each_agent_status_is_shown_with_its_cause_in_the_readers_language(
    client: Client, status: AgentStatus, cause: Cause | None, shown: str, shown_fr: str
) -> None:
    run = _run(status="ok", answer="x")
    _agent_steps(run, status, cause)
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert f'<dd class="status">{escape(shown)}</dd>' in page
    assert f'data-status="{status}"' in page
    client.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert f'<dd class="status">{escape(shown_fr)}</dd>' in page
    assert "<dd>Factures</dd>" in page and "<dd>kb:factures</dd>" not in page  # the base by its name, in French


def test_only_the_first_2000_characters_of_a_report_are_shown(client: Client) -> None:
    run = _run(status="ok", answer="x")
    _agent_steps(run, "ok", report="a" * REPORT_PREVIEW_CHARS + "TAIL")
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert "a" * REPORT_PREVIEW_CHARS in page and "TAIL" not in page
    assert "first 2,000 characters" in page


def test_a_stopped_run_keeps_its_answer_and_says_why(client: Client) -> None:
    client.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    run = _run(status="stopped", answer="Début de réponse")
    Step.objects.create(
        run=run, seq=1, kind="stopped", data={"message": "stopped: the category's monthly budget is reached"}
    )
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert "Début de réponse" in page
    assert "Arrêté : le budget mensuel de la catégorie est atteint." in page


def test_a_page_following_a_run_whose_process_died_shows_the_reapers_reason(demo_data: None) -> None:
    """The dying process published a step it never saved; the reaper's error step took its number. The page that
    heard the lost step reads the run again whole when the reaper (not its recorder) announces its end."""
    from django.utils import timezone

    from assistant.runs import leases

    run = _run(answer="Bimbamjob ")
    saved = len(_agent_steps(run, None))  # its agent started and searched, saved
    following = live.LiveRun.load(run.pk.hex, run.conversation_id, "en")
    assert following is not None and following.seq == saved
    lost = AgentAction(agent_id="agent-1", action=Action(tool="kb_search", kind="search", label="never saved", ok=True))
    message: RunEvent = {"type": "run.event", "run": run.pk.hex, "seq": saved + 1, "event": save_event(lost), "t": 0.0}
    assert following.apply(message)  # heard live, then the process was killed before its write
    leases.abandon(Run.objects.get(pk=run.pk), leases.DIED, timezone.now())
    assert list(run.steps.order_by("-seq").values_list("seq", "kind")[:1]) == [(saved + 1, "error")]
    following.refresh_finished({"type": "run.finished", "run": run.pk.hex, "status": "error"})
    with translation.override("en"):
        html = following.render_run()
    assert "The assistant could not finish this answer; what it had written is kept." in html
    assert "stopped unexpectedly" in html and "never saved" not in html


@pytest.mark.django_db(transaction=True)  # a run executes outside any transaction: its claim closes a stale connection
def test_an_unreachable_provider_is_said_in_plain_words(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(request: ModelRequest, info: Any) -> ModelResponse:
        raise ModelUnavailable("the provider could not be reached (connection refused)", unsent=True)

    monkeypatch.setattr(
        snapshot, "resolve", lambda model_id: FunctionModel(unreachable, snapshot.catalogue()[model_id])
    )
    from asgiref.sync import async_to_sync

    from assistant.runs import execution

    run = _run()
    async_to_sync(execution.execute_stored)(run.pk)  # its start read from the database, as a worker's
    run.refresh_from_db()
    assert run.status == "error"
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert "The assistant could not finish this answer; what it had written is kept." in page
    assert "The model&#x27;s provider could not be reached." in page  # its cause, in the reader's words
    assert "Traceback" not in page


# Model and document text stays text ---------------------------------------------------------


def test_script_and_onerror_from_a_model_or_a_document_show_as_text() -> None:
    html = render_markdown(
        'Hi <script>alert(1)</script> <img src=x onerror="alert(2)"> [x](javascript:alert(3)) **ok**'
    )
    assert "<script" not in html and "<img" not in html and "javascript:" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=" in html
    assert "<strong>ok</strong>" in html


def test_streaming_markdown_renders_each_finished_block_once() -> None:
    text = "First **paragraph**.\n\n- a\n- b\n\n```\ncode <b>\n\nstill code\n```\n\nLast <script>x</script>"
    stream = StreamingMarkdown()
    for end in range(1, len(text) + 1):
        html = stream.render(text[:end])
    assert html.replace("\n", "") == render_markdown(text).replace("\n", "")
    assert "&lt;script&gt;" in html


# Catching up without gaps or repeats ----------------------------------------------------------


def _message(seq: int, kind: str = "agent_action", text: str = "", offset: int | None = None) -> RunEvent:
    event: dict[str, Any] = {
        "kind": kind,
        "agent_id": "agent-1",
        "action": {"tool": "kb_search", "kind": "search", "label": "q", "count": 1, "ok": True},
    }
    if kind == "text_delta":
        event = {"kind": "text_delta", "agent_id": None, "text": text}
    message: RunEvent = {"type": "run.event", "run": "x", "seq": seq, "event": event, "t": 1.0}
    if offset is not None:
        message["offset"] = offset
    return message


@pytest.mark.django_db
def test_a_follower_skips_what_it_read_and_fills_gaps_from_the_database(demo_data: None) -> None:
    run = _run(answer="Hello ")
    _agent_steps(run, None)  # steps 1–4 saved
    follower = live.LiveRun.load(run.pk.hex, run.conversation_id)
    assert follower is not None and follower.seq == 4
    # Already read: a step and a piece of text the database had when the follower joined.
    assert follower.apply(_message(4)) and len(follower.steps) == 4
    assert follower.apply(_message(4, "text_delta", text="llo ", offset=2)) and follower.run.answer == "Hello "
    # Overlapping, then new.
    assert follower.apply(_message(4, "text_delta", text="o world", offset=4)) and follower.run.answer == "Hello world"
    assert follower.apply(_message(4, "text_delta", text="!", offset=11)) and follower.run.answer == "Hello world!"
    # A step or text beyond a gap is not applied; the database fills the gap.
    assert not follower.apply(_message(6))
    assert not follower.apply(_message(4, "text_delta", text="?", offset=21))
    Step.objects.create(run=run, seq=5, kind="agent_action", agent_id="agent-1", data=_message(5)["event"])
    Run.objects.filter(pk=run.pk).update(answer="Hello world! And more")
    steps, answer = follow.steps_since(run.pk, follower.seq)
    follower.merge(steps, answer)
    assert follower.apply(_message(6)) and follower.seq == 6
    assert (
        follower.apply(_message(6, "text_delta", text="?", offset=21))
        and follower.run.answer == "Hello world! And more?"
    )
    html = follower.render_changes()
    assert f'id="run-{run.pk}-timeline"' in html and f'id="run-{run.pk}-answer"' in html
    assert 'data-emitted="1.000000"' in html
    assert follower.render_changes() == ""  # nothing changed since
    # An agent's progress re-renders its own line only.
    assert follower.apply(_message(7))
    html = follower.render_changes()
    assert html.lstrip().startswith(f'<div class="delegation status-running" id="agent-{run.pk}-agent-1"')
    assert "-timeline" not in html and "-work" not in html


def _published(seq: int, event: Event) -> RunEvent:
    return {"type": "run.event", "run": "x", "seq": seq, "event": save_event(event), "t": 1.0, "text_offset": 0}


@pytest.mark.django_db
def test_a_push_renders_what_changed_only_and_agents_progress_can_wait(demo_data: None) -> None:
    """With many runs on one loop, rendering was most of its time: a push renders the fragments that changed, no more,
    and agents' progress (rounds, actions, cost) may wait for the next push that takes it."""
    run = _run()
    _agent_steps(run, None)  # agent-1 working, steps 1-4 saved
    follower = live.LiveRun.load(run.pk.hex, run.conversation_id)
    assert follower is not None
    block, timeline = f'id="run-{run.pk}-work-0"', f'id="run-{run.pk}-timeline"'
    line_1, line_2 = f'id="agent-{run.pk}-agent-1"', f'id="agent-{run.pk}-agent-2"'
    started = AgentStarted(
        agent_id="agent-2",
        instruction="Read the minutes",
        model="demo-small",
        model_label="Demo Small",
        resources=("kb:comptes-rendus",),
        max_rounds=5,
    )
    assert follower.apply(_published(5, started))
    assert timeline in follower.render_changes()  # a new line: the timeline
    # Progress: left for a later push, then pushed, that agent's line alone.
    search = Action(tool="kb_search", kind="search", label="minutes", count=2, ok=True)
    assert follower.apply(_published(6, AgentAction(agent_id="agent-2", action=search)))
    assert follower.render_changes(progress=False) == "" and follower.progress_pending
    html = follower.render_changes()
    assert line_2 in html and line_1 not in html and block not in html and not follower.progress_pending
    # The answer goes out at once, the progress that came with it waits.
    assert follower.apply(_published(7, AgentAction(agent_id="agent-1", action=search)))
    assert follower.apply(_message(7, "text_delta", text="Looking.", offset=0))
    html = follower.render_changes(progress=False)
    assert f'id="run-{run.pk}-answer"' in html and line_1 not in html and follower.progress_pending
    assert line_1 in follower.render_changes()
    # An agent ends while the other works: its line; once none works, their block (its working line gone).
    ended = {"model": "demo-small", "status": "ok", "rounds": 2, "seconds": 1.5, "cost_eur": 0.001, "report": "Done."}
    assert follower.apply(_published(8, AgentFinished(agent_id="agent-1", **ended)))
    html = follower.render_changes(progress=False)  # an end does not wait
    assert line_1 in html and line_2 not in html and block not in html and timeline not in html
    assert follower.apply(_published(9, AgentFinished(agent_id="agent-2", **ended)))
    html = follower.render_changes()
    assert html.lstrip().startswith(f'<div class="work" {block}') and line_1 in html and line_2 in html
    assert 'class="working"' not in html and timeline not in html
    # The main model's tool result: nothing to draw for the delegation's, the timeline for a search of its own.
    assert follower.apply(_published(10, ToolResultEvent(call_id="c1", name="delegate", ok=True)))
    assert follower.render_changes() == ""
    assert follower.apply(_published(11, ToolResultEvent(call_id="c2", name="kb_search", ok=True, action=search)))
    assert timeline in follower.render_changes()


@pytest.mark.django_db
def test_an_agents_line_is_pushed_again_only_when_what_it_shows_changed(
    demo_data: None, django_assert_num_queries: Any
) -> None:
    """With 50 chats streaming, agents' lines were most of the loop's rendering: a push renders an agent's line only
    when what it shows changed (a reasoning summary shows in its panel alone), reads no database, and its parts that
    never change (instruction, model, links) are rendered once, the line coming out as the page renders it."""
    run = _run()
    _agent_steps(run, None)
    follower = live.LiveRun.load(run.pk.hex, run.conversation_id, "en")
    assert follower is not None
    line, panel = f'id="agent-{run.pk}-agent-1"', f'id="agent-panel-body-{run.pk}-agent-1"'
    usage = UsageEvent(
        agent_id="agent-1", model="demo-small", prompt_tokens=1200, completion_tokens=300, cost_eur=0.002
    )
    with translation.override("en"), django_assert_num_queries(0):
        follower.dirty.add("work")  # as the page's first push: the timeline, with the line
        assert line in follower.render_changes()
        assert follower.apply(
            _published(5, ReasoningEvent(agent_id="agent-1", round=1, model="demo-small", summary="A"))
        )
        assert follower.render_changes() == ""  # its line shows no reasoning
        thought = ReasoningEvent(agent_id="agent-1", round=1, model="demo-small", summary="Checking **the dates**.")
        assert follower.apply(_published(6, thought))
        html = follower.render_changes("agent-1")  # the panel the page follows shows it
        assert panel in html and "<strong>the dates</strong>" in html and line not in html
        assert follower.apply(_published(7, usage))
        html = follower.render_changes()
        assert line in html and "1,500 so far" in html
        view = follower.view()
        follower.reuse_lines(view)
        pushed = agent_of(view, "agent-1")
    with translation.override("en"):
        page = render_to_string(
            "chat/_agent.html", {"view": view, "agent": agent_of(run_view(run, follower.steps), "agent-1")}
        )
    assert pushed is not None and pushed.line_html is not None
    assert pushed.line_html == page and 'href="/c/' in page and "/agents/agent-1/stop" in page


@pytest.mark.django_db
def test_more_text_alone_is_pushed_as_the_whole_view_renders_it(demo_data: None) -> None:
    """A push of more text renders the answer without the rest of the run's view: the same fragment as from the whole
    view, the answer starting where the last line or search put it."""
    run = _run(answer="Handing over. ")
    steps = _agent_steps(run, None)
    Step.objects.filter(run=run).update(text_offset=len("Handing over. "))
    follower = live.LiveRun.load(run.pk.hex, run.conversation_id)
    assert follower is not None
    follower.render_changes()  # the page's first push: the turn, the timeline, the answer
    for text in ("Looking", " at it."):
        at = len(follower.run.answer)
        assert follower.apply(_message(len(steps), "text_delta", text=text, offset=at))
        whole = render_to_string("chat/_answer.html", {"view": follower.view()})
        pushed = follower.render_changes(progress=False)
        assert pushed == whole and "Looking" in pushed and "Handing over" not in pushed and "data-emitted" in pushed
    # A new line moves where the answer starts: the timeline again, then text after it.
    started = AgentStarted(
        agent_id="agent-2", instruction="Read", model="demo-small", model_label="Demo Small", resources=(), max_rounds=5
    )
    assert follower.apply(_published(5, started) | {"text_offset": len(follower.run.answer)})
    assert f'id="run-{run.pk}-timeline"' in follower.render_changes()
    assert follower.apply(_message(5, "text_delta", text=" Done.", offset=len(follower.run.answer)))
    whole = render_to_string("chat/_answer.html", {"view": follower.view()})
    pushed = follower.render_changes()
    assert pushed == whole
    assert "Done." in pushed and "Looking" not in pushed


@pytest.mark.django_db
def test_an_agents_line_is_rendered_once_per_state_and_reused_by_its_block_and_the_finished_run(
    demo_data: None,
) -> None:
    """The block of agents an agent's end pushes, and the finished run, reuse the lines already rendered for the
    state they show, and come out as rendered afresh."""
    from django.test.signals import template_rendered

    run = _run()
    _agent_steps(run, None)
    follower = live.LiveRun.load(run.pk.hex, run.conversation_id)
    assert follower is not None
    follower.render_changes()
    rendered: list[str] = []

    def count(sender: Any, template: Any, **kwargs: Any) -> None:
        rendered.append(template.name)

    template_rendered.connect(count)
    try:
        ended: dict[str, Any] = {
            "model": "demo-small",
            "status": "ok",
            "rounds": 2,
            "seconds": 1.5,
            "cost_eur": 0.001,
            "report": "Ok.",
        }
        assert follower.apply(_published(5, AgentFinished(agent_id="agent-1", **ended)))
        html = follower.render_changes()
        assert f'id="run-{run.pk}-work-0"' in html and rendered.count("chat/_agent.html") == 1  # for the block
        rendered.clear()
        Run.objects.filter(pk=run.pk).update(status="ok")
        follower.run = Run.objects.get(pk=run.pk)
        final = follower.render_run()
        assert "chat/_agent.html" not in rendered  # its line as the block showed it
    finally:
        template_rendered.disconnect(count)
    afresh = render_to_string("chat/_run.html", {"view": run_view(follower.run, follower.steps)})
    assert final == afresh


@pytest.mark.django_db
def test_a_follower_ignores_another_conversations_run(demo_data: None) -> None:
    run = _run()
    assert live.LiveRun.load(run.pk.hex, run.conversation_id + 1) is None
    assert live.LiveRun.load(uuid.uuid4().hex, run.conversation_id) is None


@pytest.mark.django_db
def test_page_and_push_render_the_same_run(demo_data: None) -> None:
    run = _run(status="ok", answer="Done.")
    _agent_steps(run, "ok")
    follower = live.LiveRun.load(run.pk.hex, run.conversation_id)
    assert follower is not None
    pushed = render_to_string("chat/_timeline.html", {"view": follower.view()})
    page = render_to_string("chat/_timeline.html", {"view": run_view(Run.objects.get(pk=run.pk))})
    assert pushed == page


# Translations ---------------------------------------------------------------------------------


def test_the_compiled_french_catalogue_matches_its_source() -> None:
    """The .mo is committed (so `make run` needs no gettext); it must say what the .po says."""
    folder = Path(django_settings.BASE_DIR) / "locale" / "fr" / "LC_MESSAGES"
    with (folder / "django.mo").open("rb") as f:
        compiled = gettext.GNUTranslations(f)
    entries = _po_entries((folder / "django.po").read_text(encoding="utf-8"))
    assert len(entries) > 40
    for context, msgid, plural, msgstrs in entries:
        assert all(msgstrs), f"untranslated: {msgid!r}"
        if context is not None:
            assert compiled.pgettext(context, msgid) == msgstrs[0], msgid
        elif plural is None:
            assert compiled.gettext(msgid) == msgstrs[0], msgid
        else:
            assert compiled.ngettext(msgid, plural, 1) == msgstrs[0], msgid
            assert compiled.ngettext(msgid, plural, 2) == msgstrs[1], msgid


def _po_entries(text: str) -> list[tuple[str | None, str, str | None, list[str]]]:
    """(msgctxt, msgid, msgid_plural, msgstrs) of each entry of a .po file, the header excepted."""
    entries: list[dict[str, str]] = []
    key = ""
    context: str | None = None
    for line in text.splitlines():
        line = line.strip()
        match = re.match(r"^(msgctxt|msgid_plural|msgid|msgstr\[\d\]|msgstr) (\".*\")$", line)
        if match:
            key, line = match.group(1), match.group(2)
            if key == "msgctxt":
                context = line[1:-1]
                continue
            if key == "msgid":
                entries.append({} if context is None else {"msgctxt": context})
                context = None
            entries[-1][key] = ""
        elif not line.startswith('"'):
            continue
        entries[-1][key] += line[1:-1].encode().decode("unicode_escape").encode("latin-1").decode("utf-8")
    return [
        (e.get("msgctxt"), e["msgid"], e.get("msgid_plural"), [e[k] for k in sorted(e) if k.startswith("msgstr")])
        for e in entries
        if e["msgid"]
    ]
