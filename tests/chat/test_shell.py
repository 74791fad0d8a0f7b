"""The demo end to end through the Django shell: the same path a signed-in user takes."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import QuerySet
from django.test import AsyncClient, Client
from pytest_django import Settings

from assistant.knowledge.models import KnowledgeBase
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution
from assistant.runs.models import Conversation, Message, Run, Step
from tests.chat.chat_support import ASK, QUESTION
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


async def _signed_in() -> AsyncClient:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    return client


async def _last_run() -> Run:
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    return run


async def test_demo_delegates_to_two_agents_and_saves_every_step(fast_demo: None) -> None:
    client = await _signed_in()
    response = await client.post("/c/new", ASK)
    assert response.status_code == 302
    run = await _last_run()
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()

    assert run.status == "ok"
    assert "[doc-" in run.answer  # the answer cites what the agents read
    finished = [s async for s in Step.objects.filter(run=run, kind="agent_finished")]
    assert len(finished) == 2
    assert {s.data["status"] for s in finished} == {"ok"}
    assert {
        tuple(s.data["resources"]) for s in [s async for s in Step.objects.filter(run=run, kind="agent_started")]
    } == {
        ("kb:factures",),
        ("kb:comptes-rendus",),
    }
    actions = [s.data["action"]["kind"] async for s in Step.objects.filter(run=run, kind="agent_action")]
    assert actions.count("search") == 2 and actions.count("read") == 2
    # Sources of the answer are the documents the agents read; cost and tokens per model are saved.
    assert run.sources and all(s["id"].startswith("doc-") for s in run.sources)
    assert set(run.usage["by_model"]) == {"demo-large", "demo-small"}
    assert run.cost_eur == pytest.approx(sum(m["cost_eur"] for m in run.usage["by_model"].values()))
    assert await Message.objects.filter(run=run, role="assistant", content=run.answer).aexists()

    page = await client.get(f"/c/{run.conversation_id}/")
    html = page.content.decode()
    assert "Delegated to an agent (demo-small)" in html
    assert "returned in 3 rounds" in html
    assert "Demo Small (offline demo)" in html


async def test_a_second_message_continues_the_conversation(fast_demo: None) -> None:
    client = await _signed_in()
    await client.post("/c/new", ASK)
    first = await _last_run()
    await execution.wait_for(first.pk)
    await client.post(f"/c/{first.conversation_id}/send", {**ASK, "text": "And Tamaris Conseil?", "resources": []})
    second = await _last_run()
    await execution.wait_for(second.pk)
    await second.arefresh_from_db()
    assert second.conversation_id == first.conversation_id
    assert second.status == "ok"
    assert await Message.objects.filter(conversation_id=first.conversation_id).acount() == 4


async def test_stop_keeps_partial_answer_and_agent_findings(settings: Settings) -> None:
    settings.DEMO_PACE = 0.0
    settings.DEMO_LATENCY = 1.0
    client = await _signed_in()
    await client.post("/c/new", ASK)
    run = await _last_run()
    # Wait until both agents have searched (each then spends 1 s in its next call), then press Stop.
    searched = Step.objects.filter(run=run, kind="agent_action", data__action__kind="search")
    await until(lambda: _count_is(searched, 2), "both agents to search")
    response = await client.post(f"/runs/{run.pk}/stop")
    assert response.status_code == 302
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "stopped"
    assert run.answer.startswith("I am handing the search")  # the partial answer is kept
    finished = [s.data async for s in Step.objects.filter(run=run, kind="agent_finished")]
    assert len(finished) == 2
    assert {f["status"] for f in finished} == {"stopped"}
    assert all("Searched" in f["report"] for f in finished)  # what each agent had found is kept
    assert await Step.objects.filter(run=run, kind="stopped").aexists()


def test_refused_request_keeps_the_typed_message(demo_data: None) -> None:
    client = Client()
    assert client.login(username="demo", password="demo-password")
    response = client.post("/c/new", {**ASK, "resources": ["agents"]})
    assert response.status_code == 422
    html = response.content.decode()
    assert "needs at least one other resource" in html
    assert QUESTION in html  # the message is still in the composer
    assert not Run.objects.exists()

    response = client.post("/c/new", {**ASK, "resources": ["kb:nope"]})
    assert "The knowledge base &#x27;nope&#x27; does not exist" in response.content.decode()
    response = client.post("/c/new", {**ASK, "model": "gpt-unknown"})
    assert "is not allowed here" in response.content.decode()


def test_another_organisation_cannot_reach_a_conversation(demo_data: None) -> None:
    other_org = Organisation.objects.create(name="Other", slug="other")
    other = get_user_model().objects.create_user("mallory", password="mallory-password")
    Membership.objects.create(organisation=other_org, user=other)
    demo = get_user_model().objects.get(username="demo")
    conv = Conversation.objects.create(organisation=Organisation.objects.get(slug="demo"), user=demo, title="secret")
    run = Run.objects.create(conversation=conv, organisation=conv.organisation, user=demo, model="demo-large")

    client = Client()
    assert client.login(username="mallory", password="mallory-password")
    assert client.get(f"/c/{conv.pk}/").status_code == 404
    assert client.post(f"/c/{conv.pk}/send", ASK).status_code == 404
    assert client.post(f"/runs/{run.pk}/stop").status_code == 404
    # Knowledge bases of another organisation do not exist for this user.
    assert KnowledgeBase.objects.filter(organisation__slug="demo").exists()
    response = client.post("/c/new", ASK)
    assert "does not exist" in response.content.decode()


def test_pages_need_sign_in(db: None) -> None:
    response = Client().get("/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_load_demo_is_idempotent(demo_data: None) -> None:
    counts = (Organisation.objects.count(), KnowledgeBase.objects.count(), get_user_model().objects.count())
    call_command("load_demo", verbosity=0)
    assert counts == (Organisation.objects.count(), KnowledgeBase.objects.count(), get_user_model().objects.count())


def test_runs_left_running_by_a_stopped_server_are_marked_failed_with_their_answer(demo_data: None) -> None:
    demo = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    conv = Conversation.objects.create(organisation=org, user=demo, title="t")
    run = Run.objects.create(conversation=conv, organisation=org, user=demo, model="demo-large", answer="Partial")
    call_command("recover_runs", verbosity=0)
    run.refresh_from_db()
    assert run.status == "error" and "server stopped" in run.error and run.answer == "Partial"


async def _count_is(steps: QuerySet[Step], n: int) -> bool:
    return await steps.acount() == n
