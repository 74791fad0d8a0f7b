"""API keys: created and revoked by an organisation's admins on its settings pages and from the
command line, shown once, stored as a digest, each optionally restricted to models."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from assistant.orgs import keys
from assistant.orgs.models import ApiKey, Membership, Organisation
from assistant.orgs.services import policy_for

pytestmark = pytest.mark.django_db

SECRET = re.compile(r"sk-org-[\w-]{40,}")


def signed_in(username: str, org: Organisation, role: str) -> Client:
    user = get_user_model().objects.create_user(username=username, password="x")
    Membership.objects.create(organisation=org, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def org(demo_data: None) -> Organisation:
    return Organisation.objects.get(slug="demo")


def test_an_admin_creates_a_key_shown_once_and_stored_as_a_digest(org: Organisation) -> None:
    admin = signed_in("ada", org, "admin")
    assert 'href="/settings/api-keys/"' in admin.get("/settings/").content.decode()
    page = admin.post("/settings/api-keys/new", {"name": "Zapier", "restrict": "1", "models": ["demo-small"]})
    assert page.status_code == 200
    html = page.content.decode()
    found = SECRET.search(html)
    assert found is not None
    secret = found.group(0)
    key = ApiKey.objects.get(organisation=org, name="Zapier")
    assert key.allowed_models == ["demo-small"]
    assert key.created_by is not None and key.created_by.get_username() == "ada"
    assert key.digest == keys.digest_of(secret) and secret not in (key.digest, key.prefix)
    assert secret.startswith(key.prefix)
    # Shown once: the list shows the prefix, never the key again.
    again = admin.get("/settings/api-keys/").content.decode()
    assert secret not in again and key.prefix in again and "demo-small" in again
    assert keys.authenticate(secret) == key


def test_a_key_with_no_restriction_keeps_the_whole_catalogue(org: Organisation) -> None:
    org.allowed_models = ["demo-small"]
    org.save()
    admin = signed_in("ada", org, "admin")
    admin.post("/settings/api-keys/new", {"name": "Everything", "restrict": ""})
    key = ApiKey.objects.get(name="Everything")
    assert key.allowed_models is None
    assert policy_for(org, key).allowed_models is None
    assert policy_for(org).allowed_models == frozenset({"demo-small"})  # the assistant's stays


def test_a_restriction_needs_a_model_and_a_key_a_name(org: Organisation) -> None:
    admin = signed_in("ada", org, "admin")
    response = admin.post("/settings/api-keys/new", {"name": "", "restrict": "1"})
    assert response.status_code == 422
    assert not ApiKey.objects.exists()
    assert "Tick at least one model" in response.content.decode()


def test_an_admin_revokes_a_key(org: Organisation) -> None:
    key, secret = keys.create_key(org, "old")
    admin = signed_in("ada", org, "admin")
    response = admin.post(f"/settings/api-keys/{key.pk}/revoke", follow=True)
    assert "is revoked" in response.content.decode()
    key.refresh_from_db()
    assert key.revoked is not None
    assert keys.authenticate(secret) is None


def test_members_and_other_organisations_reach_no_key(org: Organisation) -> None:
    key, _secret = keys.create_key(org, "k")
    member = signed_in("mia", org, "member")
    assert member.get("/settings/api-keys/").status_code == 403
    assert member.post("/settings/api-keys/new", {"name": "x"}).status_code == 403
    assert member.post(f"/settings/api-keys/{key.pk}/revoke").status_code == 403
    other = Organisation.objects.create(name="Other", slug="other")
    mallory = signed_in("mallory", other, "admin")
    assert mallory.post(f"/settings/api-keys/{key.pk}/revoke").status_code == 404
    assert "k (" not in mallory.get("/settings/api-keys/").content.decode()
    key.refresh_from_db()
    assert key.revoked is None


def test_the_command_prints_a_key_once(org: Organisation) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_key", "--org", "demo", "--models", "demo-small", "demo-large", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert SECRET.fullmatch(secret)
    key = keys.authenticate(secret)
    assert key is not None and key.organisation == org
    assert key.allowed_models == ["demo-small", "demo-large"]
    assert "shown once" in err.getvalue()
    call_command("create_api_key", "--org", "demo", stdout=out, stderr=err)
    assert ApiKey.objects.filter(allowed_models__isnull=True).count() == 1


def test_the_command_refuses_an_unknown_organisation_or_model(org: Organisation) -> None:
    with pytest.raises(CommandError, match="No organisation"):
        call_command("create_api_key", "--org", "nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="Not in the catalogue: gpt-9"):
        call_command("create_api_key", "--org", "demo", "--models", "gpt-9", stdout=io.StringIO())
    assert not ApiKey.objects.exists()


def test_a_malformed_or_unknown_secret_opens_nothing(org: Organisation) -> None:
    _key, secret = keys.create_key(org, "k")
    assert keys.authenticate("") is None
    assert keys.authenticate("Bearer " + secret) is None
    assert keys.authenticate(secret[:-1]) is None


def test_the_service_user_cannot_sign_in(org: Organisation) -> None:
    user = keys.api_user(org)
    assert user == keys.api_user(org)
    assert not user.is_active and not user.has_usable_password()
    assert not Membership.objects.filter(user=user).exists()


def test_the_keys_page_speaks_french(org: Organisation) -> None:
    keys.create_key(org, "Zapier", ["demo-small"])
    admin = signed_in("ada", org, "admin")
    admin.cookies["django_language"] = "fr"
    html = admin.get("/settings/api-keys/").content.decode()
    for text in ("Clés d’API de Demo Company", "Nouvelle clé", "Révoquer", "Créer la clé", "garde tout le catalogue"):
        assert text in html
    assert "Gérer les clés d’API" in admin.get("/settings/").content.decode()
