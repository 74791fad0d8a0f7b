"""What htmx requests get back when they cannot get their fragment, debug off as in production: a refusal is
a 422 with the form again, a redirect moves the whole page (a signed-out user to sign in, then back), a failed
CSRF check is a notice addressed to its form. And the theme the server reads, and the favicon."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from pytest_django import Settings

from assistant.runs.models import Conversation
from tests.chat.chat_support import ASK

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Current-URL": "http://testserver/c/7/?x=1", "HX-Trigger": "composer"}


@pytest.fixture(autouse=True)
def production(settings: Settings) -> None:
    settings.DEBUG = False


def _signed_in(**options: Any) -> Client:
    client = Client(**options)
    assert client.login(username="demo", password="demo-password")
    return client


def test_a_refused_message_is_a_422_with_the_composer_and_the_text(demo_data: None) -> None:
    response = _signed_in().post("/c/new", {**ASK, "resources": ["agents"], "text": "Keep me"}, headers=HTMX)
    assert response.status_code == 422
    body = response.content.decode()
    assert body.lstrip().startswith('<form id="composer"') and "<html" not in body  # the form alone, swapped in place
    assert "needs at least one other resource" in body and ">Keep me</textarea>" in body


def test_a_blank_title_is_a_422_with_the_heading(demo_data: None) -> None:
    client = _signed_in()
    client.post("/c/new", ASK)
    conversation = Conversation.objects.get()
    response = client.post(f"/c/{conversation.pk}/rename", {"title": "  "}, headers=HTMX)
    assert response.status_code == 422
    assert response.content.decode().lstrip().startswith('<div id="conversation-head"')


def test_a_saved_form_moves_the_whole_page_and_a_refused_one_is_a_422(demo_data: None) -> None:
    client = _signed_in()
    saved = client.post("/settings/budgets/time-zone", {"zone-time_zone": "Europe/Paris"}, headers=HTMX)
    assert saved.status_code == 200 and saved["HX-Redirect"] == "/settings/budgets/"
    refused = client.post("/settings/budgets/time-zone", {"zone-time_zone": "Mars/Olympus"}, headers=HTMX)
    assert refused.status_code == 422 and 'id="time-zone-form"' in refused.content.decode()
    # Without htmx, the same post is a plain redirect.
    assert client.post("/settings/budgets/time-zone", {"zone-time_zone": "Europe/Paris"}).status_code == 302


def test_a_signed_out_htmx_request_sends_the_page_to_sign_in_and_back(demo_data: None) -> None:
    response = Client().post("/c/7/send", {"text": "draft"}, headers=HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/login/?next=%2Fc%2F7%2F%3Fx%3D1"
    # A page of another site is not where sign-in sends anyone back to.
    elsewhere = Client().post("/c/7/send", {}, headers={**HTMX, "HX-Current-URL": "https://evil.example/c/7/"})
    assert elsewhere["HX-Redirect"] == "/login/"
    plain = Client().post("/c/7/send", {"text": "draft"})
    assert plain.status_code == 302 and plain["Location"].startswith("/login/?next=")


@pytest.mark.parametrize(("language", "words"), [("en", "This page is out of date"), ("fr", "plus à jour")])
def test_a_failed_csrf_check_is_a_notice_for_the_form_that_was_sent(demo_data: None, language: str, words: str) -> None:
    client = _signed_in(enforce_csrf_checks=True)
    client.cookies["django_language"] = language
    response = client.post("/c/new", ASK, headers=HTMX)
    assert response.status_code == 403
    assert response["HX-Retarget"] == "#composer" and response["HX-Reswap"] == "afterbegin"
    body = response.content.decode()
    assert 'class="error form-notice" role="alert" data-notice="csrf"' in body and words in body
    # A trigger that is no plain id is not used as a selector.
    odd = client.post("/c/new", ASK, headers={**HTMX, "HX-Trigger": "a, b"})
    assert odd.status_code == 403 and "HX-Retarget" not in odd
    # Without htmx: Django's own page.
    plain = client.post("/c/new", ASK)
    assert plain.status_code == 403 and b"CSRF" in plain.content


def test_the_theme_chosen_is_on_the_first_paint(demo_data: None) -> None:
    client = _signed_in()
    assert "data-theme" not in client.get("/").content.decode().split(">", 2)[1]
    client.cookies["theme"] = "dark"
    assert '<html lang="en" data-theme="dark">' in client.get("/").content.decode()
    client.cookies["theme"] = '"><script>'
    assert "data-theme" not in client.get("/").content.decode().split(">", 2)[1]


def test_the_theme_can_be_chosen_without_javascript(demo_data: None) -> None:
    client = _signed_in()
    response = client.post("/theme", {"theme": "dark", "next": "/settings/"})
    assert response.status_code == 302 and response["Location"] == "/settings/"
    assert response.cookies["theme"].value == "dark" and response.cookies["theme"]["samesite"] == "Lax"
    assert '<html lang="en" data-theme="dark">' in client.get("/settings/").content.decode()
    away = client.post("/theme", {"theme": "light", "next": "https://evil.example/"})
    assert away["Location"] == "/"
    assert client.post("/theme", {"theme": "neon", "next": "/"}).cookies["theme"].value == ""  # forgotten


def test_every_page_names_its_icon_and_the_default_one_exists(demo_data: None) -> None:
    page = _signed_in().get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
