"""Scheduled tasks in the app: their owner manages them, beat's entry follows, "Run now" runs one with its cap."""

from __future__ import annotations

import gettext
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient, Client
from django_celery_beat.models import PeriodicTask
from pytest_django import Settings

from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution
from assistant.runs.models import Conversation, Run
from assistant.schedules import services
from assistant.schedules.models import Execution, ScheduledTask

FORM = {
    "name": "Bimbamjob watch",
    "prompt": "Bimbamjob: invoices 2024, payments and relationship",
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
    "category": "",
    "cost_cap_eur": "0.0027",
    "schedule": "0  7 * * 1-5",
    "enabled": "on",
}


@pytest.fixture(autouse=True)
def fast_passwords(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _client(username: str = "demo", password: str = "demo-password") -> Client:
    client = Client()
    assert client.login(username=username, password=password)
    return client


def _stranger(org_slug: str) -> Any:
    org, _ = Organisation.objects.get_or_create(slug=org_slug, defaults={"name": org_slug.title()})
    user = get_user_model().objects.create_user(f"{org_slug}-user", password="pw-123456")
    Membership.objects.create(organisation=org, user=user)
    return user


def test_the_owner_creates_a_task_and_beat_gets_its_entry(demo_data: None) -> None:
    client = _client()
    response = client.post("/tasks/new", FORM)
    assert response.status_code == 302
    task = ScheduledTask.objects.get()
    assert (task.owner.username, task.schedule, task.cost_cap_eur) == ("demo", "0 7 * * 1-5", Decimal("0.0027"))
    entry = PeriodicTask.objects.select_related("crontab").get(pk=task.periodic_task_id)
    assert (entry.task, entry.args, entry.enabled) == ("schedules.execute", f"[{task.pk}]", True)
    assert (entry.crontab.minute, entry.crontab.hour, entry.crontab.day_of_week) == ("0", "7", "1-5")
    assert str(entry.crontab.timezone) == "Europe/Paris"  # the organisation's time zone
    # Edited: the same entry follows (schedule, enabled).
    response = client.post(f"/tasks/{task.pk}/", {**FORM, "schedule": "30 18 * * *", "enabled": ""})
    assert response.status_code == 302
    entry.refresh_from_db()
    assert (entry.crontab.minute, entry.crontab.hour, entry.enabled) == ("30", "18", False)
    assert "Bimbamjob watch" in client.get("/tasks/").content.decode()
    # Deleted: its entry goes with it.
    assert client.post(f"/tasks/{task.pk}/delete").status_code == 302
    assert not ScheduledTask.objects.exists() and not PeriodicTask.objects.filter(pk=entry.pk).exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schedule": "every morning"}, "five fields"),
        ({"schedule": "0 25 * * *"}, "cannot be read"),
        ({"model": "gpt-unknown"}, "Select a valid choice"),
        ({"resources": ["agents"]}, "needs at least one other resource"),
        ({"resources": ["kb:secret"]}, "Select a valid choice"),
        ({"cost_cap_eur": "0"}, "greater than or equal to"),
    ],
)
def test_a_task_is_checked_as_a_chat_request_is(demo_data: None, change: dict[str, Any], message: str) -> None:
    response = _client().post("/tasks/new", {**FORM, **change})
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not ScheduledTask.objects.exists()


def test_another_users_task_does_not_exist_for_them(demo_data: None) -> None:
    _client().post("/tasks/new", FORM)
    task = ScheduledTask.objects.get()
    _stranger("other")
    client = _client("other-user", "pw-123456")
    for url in (f"/tasks/{task.pk}/", f"/tasks/{task.pk}/delete", f"/tasks/{task.pk}/run"):
        response = client.post(url, FORM) if not url.endswith("/") else client.get(url)
        assert response.status_code == 404
    assert "Bimbamjob watch" not in client.get("/tasks/").content.decode()
    assert ScheduledTask.objects.filter(pk=task.pk).exists() and not Execution.objects.exists()


def test_an_execution_the_policy_refuses_is_recorded_and_does_not_run(demo_data: None) -> None:
    _client().post("/tasks/new", FORM)
    task = ScheduledTask.objects.get()
    ScheduledTask.objects.filter(pk=task.pk).update(resources=["kb:gone", "agents"])
    assert services.start_execution(task.pk) is None
    execution = Execution.objects.get()
    assert execution.run is None and "gone" in execution.refused
    assert not Run.objects.exists()
    assert "did not start" in _client().get("/tasks/").content.decode()


@pytest.mark.django_db(transaction=True)
async def test_run_now_executes_it_with_its_cost_cap_in_a_new_conversation(fast_demo: None) -> None:
    from django.core.management import call_command

    await sync_to_async(call_command)("load_demo", verbosity=0)
    await sync_to_async(lambda: _client().post("/tasks/new", FORM))()
    task = await ScheduledTask.objects.aget()
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    response = await client.post(f"/tasks/{task.pk}/run")
    assert response.status_code == 302
    run = await Run.objects.select_related("conversation").aget()
    assert response["Location"] == f"/c/{run.conversation_id}/"
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "stopped"
    conversation = await Conversation.objects.aget(pk=run.conversation_id)
    assert conversation.title.startswith("Bimbamjob watch — ") and conversation.user_id == task.owner_id
    stopped = [s.data["message"] async for s in run.steps.filter(kind="stopped")]
    assert stopped == ["stopped: the task's cost cap is reached"]
    assert await Execution.objects.filter(task=task, run=run).aexists()


@pytest.mark.django_db(transaction=True)
async def test_a_task_runs_in_the_language_of_the_page_it_was_saved_from(fast_demo: None) -> None:
    """As a chat message takes its page's language (the demo model's answer when the question's is unsure, the
    model's instructions), a task keeps the one it was saved in for each of its runs."""
    from django.core.management import call_command

    await sync_to_async(call_command)("load_demo", verbosity=0)
    await sync_to_async(lambda: _client().post("/tasks/new", FORM, HTTP_ACCEPT_LANGUAGE="fr"))()
    task = await ScheduledTask.objects.aget()
    assert task.language == "fr"
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    await client.post(f"/tasks/{task.pk}/run", headers={"Accept-Language": "en"})  # who runs it now does not matter
    run = await Run.objects.aget()
    await execution.wait_for(run.pk)
    assert run.language == "fr"
    await sync_to_async(lambda: _client().post(f"/tasks/{task.pk}/", FORM, HTTP_ACCEPT_LANGUAGE="en"))()
    await task.arefresh_from_db()
    assert task.language == "en"  # saved again from an English page


def test_the_pages_take_only_the_methods_they_answer(demo_data: None) -> None:
    client = _client()
    client.post("/tasks/new", FORM)
    task = ScheduledTask.objects.get()
    for method, url in (
        ("post", "/tasks/"),
        ("put", "/tasks/"),
        ("put", "/tasks/new"),
        ("delete", f"/tasks/{task.pk}/"),
    ):
        assert getattr(client, method)(url).status_code == 405, (method, url)
    assert ScheduledTask.objects.filter(pk=task.pk).exists()


def test_the_pages_speak_french(demo_data: None) -> None:
    client = _client()
    page = client.get("/tasks/new", HTTP_ACCEPT_LANGUAGE="fr").content.decode()
    assert "Nouvelle tâche planifiée" in page and "Plafond de coût par exécution (EUR)" in page
    assert "Tâches planifiées" in client.get("/", HTTP_ACCEPT_LANGUAGE="fr").content.decode()  # the header's link


def test_the_compiled_french_catalogue_matches_its_source() -> None:
    """The .mo is committed (so a fresh machine needs no gettext); it must say what the .po says."""
    folder = Path(services.__file__).parent / "locale" / "fr" / "LC_MESSAGES"
    with (folder / "django.mo").open("rb") as f:
        compiled = gettext.GNUTranslations(f)
    pairs = re.findall(r'^msgid "(.+)"\nmsgstr "(.+)"$', (folder / "django.po").read_text(encoding="utf-8"), re.M)
    assert len(pairs) > 40
    for msgid, msgstr in pairs:
        assert compiled.gettext(msgid) == msgstr, msgid


def test_a_new_task_starts_as_the_composer_does(demo_data: None) -> None:
    page = _client().get("/tasks/new").content.decode()
    assert 'value="approfondi" selected' in page or 'value="approfondi"\n  selected' in page
    for value in ("kb:factures", "kb:comptes-rendus", "kb:contrats", "agents"):
        assert f'value="{value}"' in page
        assert re.search(rf'value="{value}"[^>]*checked', page), value
    assert 'value="0.50"' in page
