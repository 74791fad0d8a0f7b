"""A scheduled task is checked against the resources this server offers, when saved and when it executes; its
page shows times in the organisation's time zone."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import formats, timezone
from pytest_django import Settings

from assistant.runs.models import Run
from assistant.schedules import services
from assistant.schedules.models import Execution, ScheduledTask
from tests.schedules.test_tasks import FORM


@pytest.fixture
def client(demo_data: None) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username="demo"))
    return client


@pytest.mark.parametrize("resource", ["web", "code"])
def test_a_resource_the_server_does_not_offer_is_refused_when_saved(client: Client, resource: str) -> None:
    page = client.get("/tasks/new").content.decode()
    assert "not configured on this server" in page
    response = client.post("/tasks/new", {**FORM, "resources": ["kb:factures", resource, "agents"]})
    assert response.status_code == 422
    assert "not configured on this server" in response.content.decode()
    assert not ScheduledTask.objects.exists()


def test_web_is_taken_when_offered_and_the_execution_is_refused_once_it_is_not(
    client: Client, settings: Settings
) -> None:
    settings.WEB_SEARCH_URL = "http://searx.invalid/search"
    settings.WEB_FETCH_ENABLED = True
    assert client.post("/tasks/new", {**FORM, "resources": ["kb:factures", "web", "agents"]}).status_code == 302
    task = ScheduledTask.objects.get()
    assert task.resources == ["kb:factures", "web", "agents"]
    settings.WEB_SEARCH_URL, settings.WEB_FETCH_ENABLED = "", False
    assert services.start_execution(task.pk) is None  # never run without it and reported "answered"
    execution = Execution.objects.get()
    assert execution.run is None and "Web" in execution.refused_text and "not configured" in execution.refused_text
    assert not Run.objects.exists()


def test_the_task_page_shows_times_in_the_organisations_time_zone(client: Client) -> None:
    assert client.post("/tasks/new", {**FORM, "resources": ["kb:factures"]}).status_code == 302
    task = ScheduledTask.objects.get()
    assert task.organisation.time_zone == "Europe/Paris"
    execution = Execution.objects.create(task=task, refused="a test")
    started = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
    Execution.objects.filter(pk=execution.pk).update(started=started)
    paris = timezone.localtime(started, zoneinfo.ZoneInfo("Europe/Paris"))
    expected = formats.date_format(paris, "SHORT_DATETIME_FORMAT")
    in_utc = formats.date_format(started, "SHORT_DATETIME_FORMAT")
    assert expected != in_utc
    for url in (f"/tasks/{task.pk}/", "/tasks/"):
        html = client.get(url).content.decode()
        assert expected in html and in_utc not in html, url
        assert "Times in Europe/Paris" in html
