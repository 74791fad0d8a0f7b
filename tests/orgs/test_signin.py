"""Signing in: failed sign-ins throttled per account and per address (django-axes), and the password
reset by e-mail (Django's views), through the pages as a browser posts them."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from pytest_django import Settings

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def users(db: None, settings: Settings) -> None:
    settings.AXES_FAILURE_LIMIT = 10
    settings.SIGNIN_LOCKOUT_MINUTES = 15
    model = get_user_model()
    model.objects.create_user("alice", email="alice@example.com", password="alice-password")
    model.objects.create_user("bob", email="bob@example.com", password="bob-password")


def sign_in(client: Client, username: str, password: str, address: str = "203.0.113.7") -> tuple[int, str, bool]:
    response = client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)
    return response.status_code, response.content.decode(), "_auth_user_id" in client.session


def test_twenty_wrong_passwords_lock_the_account_and_the_address_out() -> None:
    client = Client()
    for _ in range(20):
        status, html, signed_in = sign_in(client, "alice", "guess")
        assert not signed_in
    assert status == 429
    assert "Too many failed sign-ins; try again in 15 minutes." in html
    # The right password is refused too, from this address and from another one (the account is locked).
    status, html, signed_in = sign_in(client, "alice", "alice-password")
    assert (status, signed_in) == (429, False) and "try again in 15 minutes" in html
    status, _html, signed_in = sign_in(Client(), "alice", "alice-password", address="198.51.100.9")
    assert (status, signed_in) == (429, False)
    # The address is locked for every account...
    status, _html, signed_in = sign_in(Client(), "bob", "bob-password")
    assert (status, signed_in) == (429, False)
    # ...but another account from another address signs in.
    status, _html, signed_in = sign_in(Client(), "bob", "bob-password", address="198.51.100.9")
    assert signed_in and status == 302


def test_below_the_limit_the_right_password_signs_in(settings: Settings) -> None:
    client = Client()
    for _ in range(9):
        status, html, _ = sign_in(client, "alice", "guess")
        assert status == 200 and "didn't match" in html and "Too many" not in html
    assert sign_in(client, "alice", "alice-password")[2]


def test_the_lock_out_ends_after_its_time(settings: Settings) -> None:
    settings.AXES_COOLOFF_TIME = 1  # hours: however slow the ten failures, they all count
    client = Client()
    for _ in range(10):
        sign_in(client, "alice", "guess")
    assert sign_in(client, "alice", "alice-password")[0] == 429
    import time

    settings.AXES_COOLOFF_TIME = 0.0001  # hours: a third of a second, over once the last failure is older
    time.sleep(0.5)
    assert sign_in(client, "alice", "alice-password")[2]


def test_the_lock_out_message_speaks_french() -> None:
    client = Client()
    client.cookies["django_language"] = "fr"
    for _ in range(10):
        status, html, _ = sign_in(client, "alice", "guess")
    assert status == 429
    assert "Trop d’échecs de connexion ; réessayez dans 15 minutes." in html
    assert "Mot de passe oublié ?" in html


def test_a_password_reset_by_e_mail_sets_a_new_password() -> None:
    client = Client()
    login = client.get("/login/").content.decode()
    assert 'href="/password-reset/"' in login and "Forgot your password?" in login
    response = client.post("/password-reset/", {"email": "alice@example.com"}, follow=True)
    assert response.status_code == 200 and "Check your e-mail" in response.content.decode()
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["alice@example.com"] and message.subject == "Reset your password"
    found = re.search(r"http://testserver(/password-reset/\S+/\S+/)", str(message.body))
    assert found is not None and "alice" in message.body
    # The link redirects to a page without the token in its address, which sets the password.
    page = client.get(found.group(1), follow=True)
    assert "Choose a new password" in page.content.decode()
    set_url = page.redirect_chain[-1][0]
    done = client.post(set_url, {"new_password1": "a-new-secret-9", "new_password2": "a-new-secret-9"}, follow=True)
    assert "Your password is saved" in done.content.decode()
    assert not sign_in(Client(), "alice", "alice-password")[2]
    assert sign_in(Client(), "alice", "a-new-secret-9")[2]
    # The link was used: it opens nothing any more.
    again = client.get(found.group(1), follow=True).content.decode()
    assert "This link is invalid" in again


def test_an_unknown_address_sends_nothing_and_says_the_same() -> None:
    response = Client().post("/password-reset/", {"email": "nobody@example.com"}, follow=True)
    assert "Check your e-mail" in response.content.decode()
    assert mail.outbox == []


def test_a_password_reset_ends_the_accounts_lock_out() -> None:
    for _ in range(10):
        sign_in(Client(), "alice", "guess", address="192.0.2.1")
    assert sign_in(Client(), "alice", "alice-password", address="198.51.100.9")[0] == 429
    client = Client()
    client.post("/password-reset/", {"email": "alice@example.com"})
    found = re.search(r"http://testserver(/password-reset/\S+/\S+/)", str(mail.outbox[0].body))
    assert found is not None
    page = client.get(found.group(1), follow=True)
    client.post(page.redirect_chain[-1][0], {"new_password1": "a-new-secret-9", "new_password2": "a-new-secret-9"})
    assert sign_in(Client(), "alice", "a-new-secret-9", address="198.51.100.9")[2]


def test_an_async_sign_in_is_refused_for_a_locked_out_account_too() -> None:
    from asgiref.sync import async_to_sync
    from django.contrib.auth import aauthenticate
    from django.test import RequestFactory

    def attempt(password: str) -> object:
        request = RequestFactory().post("/login/", REMOTE_ADDR="198.51.100.20")
        return async_to_sync(aauthenticate)(request, username="alice", password=password)

    assert attempt("alice-password") is not None
    for _ in range(10):
        sign_in(Client(), "alice", "guess")
    assert attempt("alice-password") is None


def test_reset_requests_are_limited_per_address(settings: Settings) -> None:
    settings.PASSWORD_RESET_LIMIT = 3
    client = Client()
    for _ in range(3):
        assert (
            client.post("/password-reset/", {"email": "alice@example.com"}, REMOTE_ADDR="192.0.2.5").status_code == 302
        )
    refused = client.post("/password-reset/", {"email": "bob@example.com"}, REMOTE_ADDR="192.0.2.5")
    assert refused.status_code == 429 and "Too many reset requests from here" in refused.content.decode()
    assert len(mail.outbox) == 3
    assert client.post("/password-reset/", {"email": "bob@example.com"}, REMOTE_ADDR="192.0.2.6").status_code == 302
    assert len(mail.outbox) == 4
