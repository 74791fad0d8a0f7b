"""Renaming and deleting a conversation, through the pages.

A deleted conversation disappears for its owner (sidebar, page, websocket) and its text is erased,
while every figure its runs carry (tokens, cost, carbon, category, agents) stays as it was: the usage
page, its CSV and the API's ``GET /v1/runs/{id}`` answer the same before and after.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import QuerySet
from django.test import AsyncClient, Client
from pytest_django import Settings

from assistant.asgi import application
from assistant.chat import deletion
from assistant.chat.consumers import CLOSE_DELETED, CLOSE_NOT_FOUND
from assistant.engine.events import Source
from assistant.engine.types import UsagePart
from assistant.engine.usage import RunUsage
from assistant.orgs import keys
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution
from assistant.runs.models import Conversation, Message, Run, Step
from tests.asgi_app import asgi_transport
from tests.chat.chat_support import ASK, PAGE_SECONDS, QUESTION
from tests.waiting import until

OLD_STEPS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "steps_before_typing.json").read_text())[
    "steps"
]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]


def _user(username: str, org: Organisation, role: str = "member") -> Any:
    user = get_user_model().objects.create_user(username, password=f"{username}-password")
    Membership.objects.create(organisation=org, user=user, role=role)
    return user


def _client(username: str = "demo") -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-password")
    return client


def _conversation(title: str = "Invoices of March") -> Conversation:
    demo = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    conv = Conversation.objects.create(organisation=org, user=demo, title=title)
    run = Run.objects.create(conversation=conv, organisation=org, user=demo, model="demo-large", status="ok")
    Message.objects.create(conversation=conv, role="user", content="What about March?", run=run)
    return conv


async def _finished_demo_run(client: AsyncClient) -> Run:
    response = await client.post("/c/new", ASK)
    assert response.status_code == 302
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "ok"
    return run


def _accounting(run: Run) -> dict[str, Any]:
    """Every figure a run carries, its agents' included."""
    run.refresh_from_db()
    agents = [
        {k: s.data.get(k) for k in ("model", "status", "rounds", "seconds", "cost_eur", "usage", "profile")}
        for s in Step.objects.filter(run=run, kind__in=["agent_started", "agent_finished"]).order_by("seq")
    ]
    usage_steps = [s.data for s in Step.objects.filter(run=run, kind__in=["usage", "round_started"]).order_by("seq")]
    return {
        "status": run.status,
        "model": run.model,
        "level": run.level,
        "category": run.category,
        "rounds": run.rounds,
        "usage": run.usage,
        "cost_eur": run.cost_eur,
        "user": run.user_id,
        "created": run.created,
        "finished": run.finished,
        "steps": Step.objects.filter(run=run).count(),
        "agents": agents,
        "usage_steps": usage_steps,
    }


def _without_tokens(html: str) -> str:
    """A page without its CSRF tokens (masked anew on each response)."""
    return re.sub(r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]+', r"\1", html)


def _text_left(conv_id: int, run: Run, *texts: str) -> list[str]:
    """Where any of ``texts`` still shows in the conversation's rows."""
    run.refresh_from_db()
    found = []
    rows = {
        "title": Conversation.objects.get(pk=conv_id).title,
        "answer": run.answer,
        "sources": json.dumps(run.sources),
        "messages": json.dumps(list(Message.objects.filter(conversation_id=conv_id).values_list("content", flat=True))),
        "steps": json.dumps([s.data for s in Step.objects.filter(run=run)]),
    }
    for where, value in rows.items():
        found += [f"{where}: {t}" for t in texts if t and t in value]
    return found


# Rename ---------------------------------------------------------------------------------------------


def test_the_owner_renames_a_conversation_and_the_sidebar_shows_it(demo_data: None) -> None:
    conv = _conversation()
    client = _client()
    page = client.get(f"/c/{conv.pk}/").content.decode()
    assert f'action="/c/{conv.pk}/rename"' in page and f'href="/c/{conv.pk}/delete"' in page

    response = client.post(f"/c/{conv.pk}/rename", {"title": "  March invoices, checked  "})
    assert response.status_code == 302 and response["Location"] == f"/c/{conv.pk}/"
    conv.refresh_from_db()
    assert conv.title == "March invoices, checked"  # trimmed
    home = client.get("/").content.decode()
    assert f'<a id="conversation-link-{conv.pk}" href="/c/{conv.pk}/">March invoices, checked</a>' in home


def test_renaming_with_htmx_swaps_the_heading_and_the_sidebar_link(demo_data: None) -> None:
    conv = _conversation()
    response = _client().post(f"/c/{conv.pk}/rename", {"title": "Checked"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert '<div id="conversation-head"' in html and '<h1 class="title">Checked</h1>' in html
    assert f'<a id="conversation-link-{conv.pk}" href="/c/{conv.pk}/" hx-swap-oob="true">Checked</a>' in html


@pytest.mark.parametrize("title", ["", "   ", "x" * 201])
def test_an_empty_or_too_long_title_is_refused_and_the_old_one_kept(demo_data: None, title: str) -> None:
    conv = _conversation()
    client = _client()
    response = client.post(f"/c/{conv.pk}/rename", {"title": title})
    assert response.status_code == 422
    html = response.content.decode()
    assert ("needs a title" in html) if not title.strip() else ("at most 200 characters" in html)
    assert "The title is unchanged." in html
    conv.refresh_from_db()
    assert conv.title == "Invoices of March"

    response = client.post(f"/c/{conv.pk}/rename", {"title": title}, headers={"HX-Request": "true"})
    assert response.status_code == 422 and "The title is unchanged." in response.content.decode()
    conv.refresh_from_db()
    assert conv.title == "Invoices of March"
    assert len("x" * 200) == 200 and client.post(f"/c/{conv.pk}/rename", {"title": "x" * 200}).status_code == 302


def test_nul_characters_are_dropped_from_a_title(demo_data: None) -> None:
    # NUL is no text (PostgreSQL refuses it in a text column, which would be a 500): it is dropped.
    conv = _conversation()
    client = _client()
    assert client.post(f"/c/{conv.pk}/rename", {"title": "March\x00 checked"}).status_code == 302
    conv.refresh_from_db()
    assert conv.title == "March checked"
    response = client.post(f"/c/{conv.pk}/rename", {"title": "\x00\x00"})
    assert response.status_code == 422 and "needs a title" in response.content.decode()
    conv.refresh_from_db()
    assert conv.title == "March checked"


def test_the_french_page_says_it_in_french(demo_data: None) -> None:
    conv = _conversation()
    client = _client()
    client.cookies["django_language"] = "fr"
    page = client.get(f"/c/{conv.pk}/").content.decode()
    assert "Renommer" in page and "Supprimer" in page
    response = client.post(f"/c/{conv.pk}/rename", {"title": ""})
    assert "Le titre ne change pas." in response.content.decode()


def test_another_users_conversation_cannot_be_renamed_or_deleted(demo_data: None) -> None:
    demo_org = Organisation.objects.get(slug="demo")
    other_org = Organisation.objects.create(name="Other", slug="other")
    _user("colleague", demo_org)  # same organisation, another member
    _user("admin2", demo_org, role="admin")  # even an admin of the organisation
    _user("mallory", other_org)
    conv = _conversation()
    for username in ("colleague", "admin2", "mallory"):
        client = _client(username)
        assert client.post(f"/c/{conv.pk}/rename", {"title": "mine now"}).status_code == 404
        assert client.get(f"/c/{conv.pk}/delete").status_code == 404
        assert client.post(f"/c/{conv.pk}/delete").status_code == 404
    conv.refresh_from_db()
    assert conv.title == "Invoices of March" and conv.deleted is None
    assert Message.objects.filter(conversation=conv).exists()


def test_rename_and_delete_need_a_post_with_the_csrf_token(demo_data: None) -> None:
    conv = _conversation()
    client = Client(enforce_csrf_checks=True)
    assert client.login(username="demo", password="demo-password")
    assert client.post(f"/c/{conv.pk}/rename", {"title": "x"}).status_code == 403
    assert client.post(f"/c/{conv.pk}/delete").status_code == 403
    assert client.get(f"/c/{conv.pk}/rename").status_code == 405
    conv.refresh_from_db()
    assert conv.title == "Invoices of March" and conv.deleted is None
    # The forms' own tokens are accepted.
    page = client.get(f"/c/{conv.pk}/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    assert client.post(f"/c/{conv.pk}/rename", {"title": "x", "csrfmiddlewaretoken": token[1]}).status_code == 302
    confirm = client.get(f"/c/{conv.pk}/delete").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', confirm)
    assert token is not None
    assert client.post(f"/c/{conv.pk}/delete", {"csrfmiddlewaretoken": token[1]}).status_code == 302


# Delete ---------------------------------------------------------------------------------------------


def test_the_confirmation_page_deletes_with_a_post_and_goes_home(demo_data: None) -> None:
    conv = _conversation()
    client = _client()
    confirm = client.get(f"/c/{conv.pk}/delete")
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert f'<form class="card" method="post" action="/c/{conv.pk}/delete">' in html
    assert "csrfmiddlewaretoken" in html
    conv.refresh_from_db()
    assert conv.deleted is None  # showing the page deletes nothing

    response = client.post(f"/c/{conv.pk}/delete")
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get(f"/c/{conv.pk}/").status_code == 404
    assert f"/c/{conv.pk}/" not in client.get("/").content.decode()
    assert client.post(f"/c/{conv.pk}/rename", {"title": "again"}).status_code == 404
    assert client.post(f"/c/{conv.pk}/delete").status_code == 404
    assert client.post(f"/c/{conv.pk}/send", ASK).status_code == 404


def test_deleting_with_htmx_redirects_the_browser_home(demo_data: None) -> None:
    conv = _conversation()
    response = _client().post(f"/c/{conv.pk}/delete", headers={"HX-Request": "true"})
    assert response.status_code == 200 and response["HX-Redirect"] == "/"
    conv.refresh_from_db()
    assert conv.deleted is not None


async def test_deleting_erases_the_text_and_keeps_every_usage_figure(fast_demo: None) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    run = await _finished_demo_run(client)
    conv_id = run.conversation_id
    answer = run.answer
    instructions = [s.data["instruction"] async for s in Step.objects.filter(run=run, kind="agent_started")]
    reports = [s.data["report"] async for s in Step.objects.filter(run=run, kind="agent_finished")]
    assert len(instructions) == 2 and all(reports) and "[doc-" in answer

    before = await sync_to_async(_accounting)(run)
    usage_page = _without_tokens((await client.get("/settings/usage/")).content.decode())
    usage_csv = (await client.get("/settings/usage.csv")).content.decode()
    assert "demo-small" in usage_page and str(run.pk) in usage_csv

    response = await client.post(f"/c/{conv_id}/delete")
    assert response.status_code == 302 and response["Location"] == "/"

    # Gone for the user: the list, the page.
    assert f"/c/{conv_id}/" not in (await client.get("/")).content.decode()
    assert (await client.get(f"/c/{conv_id}/")).status_code == 404
    # Its text is erased everywhere it was saved; the run and its figures are all there.
    assert await sync_to_async(_text_left)(conv_id, run, QUESTION, answer, *instructions, *reports) == []
    assert not await Message.objects.filter(conversation_id=conv_id).aexists()
    assert await sync_to_async(_accounting)(run) == before
    assert _without_tokens((await client.get("/settings/usage/")).content.decode()) == usage_page
    assert (await client.get("/settings/usage.csv")).content.decode() == usage_csv


async def test_deleting_a_conversation_stops_its_running_run_first(settings: Settings) -> None:
    settings.DEMO_PACE = 0.0
    settings.DEMO_LATENCY = 1.0  # each call takes a second: the run is still running when the user deletes
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    await client.post("/c/new", ASK)
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    started = Step.objects.filter(run=run, kind="agent_started")
    await until(lambda: _count_is(started, 2), "both agents to start")
    await run.arefresh_from_db()
    assert run.is_running

    response = await client.post(f"/c/{run.conversation_id}/delete")
    assert response.status_code == 302
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.stop_requested and run.status == "stopped"  # stopped as Stop stops it, not failed
    assert run.usage.get("by_model") and run.cost_eur > 0  # what it spent is kept
    assert (await client.get(f"/c/{run.conversation_id}/")).status_code == 404
    # What the run wrote as it ended (its partial answer, the assistant's message) is erased too.
    assert await sync_to_async(_text_left)(run.conversation_id, run, QUESTION, "I am handing the search") == []
    assert not await Message.objects.filter(conversation_id=run.conversation_id).aexists()


def test_what_a_run_writes_after_the_delete_is_erased_as_it_is_saved(demo_data: None) -> None:
    conv = _conversation()
    run = conv.runs.get()
    Run.objects.filter(pk=run.pk).update(status="running")
    deletion.erase(conv.pk)
    # As a run stopped meanwhile (on another worker, say) ends: ``runs.execution.end_run``.
    run = Run.objects.select_related("organisation", "conversation").get(pk=run.pk)
    sources = {"doc-1": Source(id="doc-1", title="Secret")}
    usage = RunUsage()
    usage.add("demo-large", UsagePart(prompt_tokens=10, completion_tokens=5), 0.5, None)
    assert execution.end_run(run, execution.Ending("stopped", "", 1, "A late answer", sources, usage)) is not None
    run.refresh_from_db()
    assert run.answer == "" and run.sources == [] and run.cost_eur == 0.5 and run.status == "stopped"
    assert not Message.objects.filter(conversation=conv).exists()


TRACE_DEFAULTS: dict[str, Any] = {
    "started_at": 0.0,
    "seconds": 0.0,
    "call_id": "",
    "result_chars": 0,
    "failed": False,
    "finish_reason": "",
    "retried": [],
    "retry_after": None,
    # A call's cost source, an agent's estimate: what an old step says (reported, none).
    "cost_source": "reported",
    "estimated_eur": 0.0,
    "estimate_eur": None,
    "estimate_max_eur": None,
}


def test_step_text_is_emptied_and_its_shape_kept() -> None:
    def erased(kind: str, data: dict[str, Any]) -> dict[str, Any]:
        step = Step(kind=kind, agent_id=data.get("agent_id") or "", data=data)
        deletion.erase_step(step)
        # What the events gained for traces (their times, the call they answer): defaults in an old step.
        return {k: v for k, v in step.data.items() if k != "v" and (k not in TRACE_DEFAULTS or TRACE_DEFAULTS[k] != v)}

    data = {
        "kind": "agent_action",
        "agent_id": "a1",
        "action": {"tool": "kb_search", "kind": "search", "label": "Searched “Bimbamjob”", "count": 3, "ok": True},
        "sources": [{"id": "doc-1", "title": "Invoice", "kind": "document", "where": "factures"}],
    }
    assert erased("agent_action", data) == {
        "kind": "agent_action",
        "agent_id": "a1",
        "action": {
            "tool": "kb_search",
            "kind": "search",
            "label": "",
            "count": 3,
            "ok": True,
            "demo_web": False,
            "stopped": None,
            "started": True,
            "detail": "",
            "where": "",
        },
        "sources": [],
    }
    finished = next(s["data"] for s in OLD_STEPS if s["kind"] == "agent_finished")
    # (read from version 0, it gains its cause and whether its report is the engine's: none, not partial)
    # (and its usage the counts of failed and estimated calls, none)
    assert erased("agent_finished", finished) == {
        **finished,
        "report": "",
        "sources": [],
        "cause": None,
        "partial_report": False,
        "usage": {**finished["usage"], "tokens_estimated": 0, "failed_calls": 0, "estimated_eur": 0.0},
    }
    call = next(s["data"] for s in OLD_STEPS if s["kind"] == "tool_call")
    assert erased("tool_call", call) == {**call, "arguments": {}}
    result = next(s["data"] for s in OLD_STEPS if s["kind"] == "tool_result")
    assert erased("tool_result", result) == result  # no text in it: nothing changes
    usage = next(s["data"] for s in OLD_STEPS if s["kind"] == "usage")
    # No text; version 1 says it was not estimated, and which model names the provider was sent and answered: none.
    assert erased("usage", usage) == {**usage, "estimated": False, "api_model": "", "response_model": ""}
    # A step no event can be read from is emptied whole.
    unreadable = Step(kind="agent_finished", data={"v": 99, "report": "Secret"})
    assert deletion.erase_step(unreadable) and unreadable.data == {}


def test_a_scheduled_tasks_execution_in_a_deleted_conversation_links_nowhere(demo_data: None) -> None:
    from assistant.schedules.models import Execution, ScheduledTask

    conv = _conversation()
    task = ScheduledTask.objects.create(
        organisation=conv.organisation,
        owner=conv.user,
        name="Weekly",
        prompt="Bimbamjob?",
        model="demo-large",
        schedule="0 8 * * 1",
        cost_cap_eur=1,
    )
    Execution.objects.create(task=task, run=conv.runs.get())
    client = _client()
    assert f'href="/c/{conv.pk}/"' in client.get(f"/tasks/{task.pk}/").content.decode()
    client.post(f"/c/{conv.pk}/delete")
    html = client.get(f"/tasks/{task.pk}/").content.decode()
    assert f'href="/c/{conv.pk}/"' not in html and "conversation deleted" in html


# The websocket and the API ------------------------------------------------------------------------------


async def _socket(conv_id: int, session: str) -> WebsocketCommunicator:
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"sessionid={session}".encode()),
    ]
    communicator = WebsocketCommunicator(application, f"/ws/c/{conv_id}/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _close_code(communicator: WebsocketCommunicator) -> int | None:
    async with asyncio.timeout(PAGE_SECONDS):  # a guard against hanging, not a measure
        while True:
            message: dict[str, Any] = await communicator.receive_output(timeout=PAGE_SECONDS)
            if message["type"] == "websocket.close":
                code: int | None = message.get("code")
                return code


async def test_a_page_open_on_a_deleted_conversation_stops_receiving_it(demo_data: None) -> None:
    conv = await sync_to_async(_conversation)()
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    session = client.cookies["sessionid"].value
    open_page = await _socket(conv.pk, session)
    assert await open_page.receive_nothing(timeout=0.2)

    assert (await client.post(f"/c/{conv.pk}/delete")).status_code == 302
    assert await _close_code(open_page) == CLOSE_DELETED
    await open_page.disconnect()

    reopened = await _socket(conv.pk, session)
    assert await _close_code(reopened) == CLOSE_NOT_FOUND  # a deleted conversation is not found
    await reopened.disconnect()


async def test_the_api_still_answers_a_run_of_a_deleted_conversation_with_its_usage(fast_demo: None) -> None:
    """API conversations belong to the organisation's service user and are in no sidebar; when one is
    deleted (``deletion.delete_conversation``, the pages' path), its runs keep answering with every figure,
    their text erased."""
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    _, secret = await sync_to_async(keys.create_key)(org, "deletion")
    transport = asgi_transport()
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://testserver", headers={"Authorization": f"Bearer {secret}"}, timeout=30
    ) as api:
        body = {
            "model": "demo-large",
            "messages": [{"role": "user", "content": QUESTION}],
            "tools_enabled": ["kb:factures", "kb:comptes-rendus", "agents"],
            "reasoning_level": "approfondi",
        }
        completion = (await api.post("/v1/chat/completions", json=body)).json()
        run_id = completion["run_id"]
        before = (await api.get(f"/v1/runs/{run_id}")).json()
        assert before["status"] == "ok" and before["answer"] and before["usage"]["cost_eur"] > 0

        run = await Run.objects.select_related("conversation").aget(pk=run_id)
        await deletion.delete_conversation(run.conversation)

        response = await api.get(f"/v1/runs/{run_id}")
        assert response.status_code == 200
        after = response.json()
    assert after["usage"] == before["usage"]
    assert after["rounds"] == before["rounds"]
    assert [s["agent"]["usage"] for s in after["steps"] if s["type"] == "run_agent"] == [
        s["agent"]["usage"] for s in before["steps"] if s["type"] == "run_agent"
    ]
    assert {k: after[k] for k in ("status", "model", "category", "created", "finished")} == {
        k: before[k] for k in ("status", "model", "category", "created", "finished")
    }
    assert after["answer"] == "" and after["sources"] == []
    assert all(s["agent"]["instruction"] == "" and s["agent"]["report"] == "" for s in after["steps"] if "agent" in s)


async def _count_is(steps: QuerySet[Step], n: int) -> bool:
    return await steps.acount() == n
