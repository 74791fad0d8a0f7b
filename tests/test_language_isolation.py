"""What one test leaves behind that the next must not see (``tests/conftest.py``)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.utils import translation

pytestmark = pytest.mark.django_db  # both in the same group, so that pytest-django keeps them in this order


def test_a_request_in_french_leaves_french_active_in_the_tests_thread(client: Client) -> None:
    client.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    client.get("/")
    assert translation.get_language() == "fr"  # Django's LocaleMiddleware does not deactivate it after the response


def test_the_next_test_starts_in_the_sites_language() -> None:
    assert translation.get_language() == settings.LANGUAGE_CODE == "en"
    assert translation.gettext("New chat") == "New chat"  # "Nouvelle conversation" in French
