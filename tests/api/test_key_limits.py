"""API keys' expiry, rotation with a grace period, per-key rate limit and the failed-key limit per address,
through the API's own routes (in process) and the keys page."""

from __future__ import annotations

import re
import zoneinfo
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from assistant.orgs import keys
from assistant.orgs.models import ApiKey, Membership, Organisation

pytestmark = pytest.mark.django_db

SECRET = re.compile(r"sk-org-[\w-]{40,}")


@pytest.fixture
def org(demo_data: None) -> Organisation:
    return Organisation.objects.get(slug="demo")


def get(secret: str, address: str = "203.0.113.5", path: str = "/v1/models") -> tuple[int, dict[str, Any], Any]:
    response = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {secret}", REMOTE_ADDR=address)
    return response.status_code, response.json(), response


def admin_client(org: Organisation) -> Client:
    user = get_user_model().objects.create_user(username="ada", password="x")
    Membership.objects.create(organisation=org, user=user, role="admin")
    client = Client()
    client.force_login(user)
    return client


def test_an_expired_key_gets_401_in_openais_shape(org: Organisation) -> None:
    _key, secret = keys.create_key(org, "soon", expires=timezone.now() - timedelta(seconds=1))
    status, body, _ = get(secret)
    assert status == 401
    assert set(body["error"]) >= {"message", "type", "param", "code"}
    assert body["error"]["code"] == "expired_api_key" and "expired" in body["error"]["message"]
    _live, live_secret = keys.create_key(org, "later", expires=timezone.now() + timedelta(days=1))
    assert get(live_secret)[0] == 200
    # A key made before expiry existed has none and keeps working.
    old, old_secret = keys.create_key(org, "old")
    assert old.expires is None and get(old_secret)[0] == 200


def test_an_admin_chooses_the_expiry_and_rate_limit_at_creation(org: Organisation) -> None:
    admin = admin_client(org)
    day = (timezone.now() + timedelta(days=10)).date()
    page = admin.post(
        "/settings/api-keys/new", {"name": "CI", "restrict": "", "expires_on": day.isoformat(), "rate_limit": "7"}
    )
    assert page.status_code == 200 and SECRET.search(page.content.decode())
    key = ApiKey.objects.get(name="CI")
    assert key.rate_limit == 7 and key.requests_per_minute == 7
    # It works to the end of that day in the organisation's time zone.
    local = key.expires.astimezone(zoneinfo.ZoneInfo(org.time_zone)) if key.expires else None
    assert local is not None and (local.date(), local.hour, local.minute) == (day + timedelta(days=1), 0, 0)
    refused = admin.post("/settings/api-keys/new", {"name": "Past", "expires_on": "2001-01-01", "rate_limit": "0"})
    assert refused.status_code == 422
    html = refused.content.decode()
    assert "Choose today or a later day." in html and not ApiKey.objects.filter(name="Past").exists()


def test_rotation_shows_a_new_key_once_and_the_old_one_works_for_the_grace_period(
    org: Organisation, settings: Settings
) -> None:
    settings.API_KEY_ROTATION_GRACE_HOURS = 24
    old, old_secret = keys.create_key(org, "Zapier", ["demo-small"], rate_limit=30)
    admin = admin_client(org)
    page = admin.post(f"/settings/api-keys/{old.pk}/rotate")
    assert page.status_code == 200
    found = SECRET.search(page.content.decode())
    assert found is not None and found.group(0) != old_secret
    new_secret = found.group(0)
    new = keys.authenticate(new_secret)
    assert new is not None and (new.name, new.allowed_models, new.rate_limit) == ("Zapier", ["demo-small"], 30)
    old.refresh_from_db()
    assert old.replaced_by == new and old.rotated is not None
    assert old.expires is not None and abs(old.expires - (old.rotated + timedelta(hours=24))) < timedelta(seconds=5)
    # Both work during the grace period...
    assert get(old_secret)[0] == 200 and get(new_secret)[0] == 200
    assert "works until" in admin.get("/settings/api-keys/").content.decode()
    # ...a second rotation of the old key is refused...
    assert admin.post(f"/settings/api-keys/{old.pk}/rotate").status_code == 422
    # ...and once it is over, the old one is refused and says why.
    ApiKey.objects.filter(pk=old.pk).update(expires=timezone.now() - timedelta(seconds=1))
    status, body, _ = get(old_secret)
    assert status == 401 and body["error"]["code"] == "expired_api_key" and "rotation" in body["error"]["message"]
    assert get(new_secret)[0] == 200


def test_over_its_rate_limit_a_key_gets_429_with_retry_after(org: Organisation, settings: Settings) -> None:
    settings.API_KEY_RATE_LIMIT = 5
    _key, secret = keys.create_key(org, "default limit")
    _fast, fast_secret = keys.create_key(org, "own limit", rate_limit=8)
    statuses = [get(secret)[0] for _ in range(5)]
    assert statuses == [200] * 5
    status, body, response = get(secret)
    assert status == 429
    assert body["error"]["code"] == "rate_limit_exceeded" and body["error"]["type"] == "requests"
    assert "5 requests per minute" in body["error"]["message"]
    assert 1 <= int(response["Retry-After"]) <= 60 and response["x-should-retry"] == "true"
    # Another key has its own count and its own limit.
    assert [get(fast_secret)[0] for _ in range(9)] == [200] * 8 + [429]


def test_many_bad_keys_from_one_address_get_429_even_with_the_right_key(org: Organisation, settings: Settings) -> None:
    settings.API_FAILED_KEY_LIMIT = 5
    settings.API_FAILED_KEY_LOCKOUT_SECONDS = 900
    _key, secret = keys.create_key(org, "real")
    revoked, revoked_secret = keys.create_key(org, "revoked")
    keys.revoke(revoked)
    guesses = ["sk-org-guess1", "nonsense", revoked_secret, "sk-org-guess2", "sk-org-guess3"]
    assert [get(g, address="198.51.100.66")[0] for g in guesses] == [401] * 5
    status, body, response = get(secret, address="198.51.100.66")
    assert status == 429 and body["error"]["code"] == "too_many_failed_keys"
    assert 800 <= int(response["Retry-After"]) <= 900
    assert get("sk-org-guess4", address="198.51.100.66")[0] == 429
    # Another address is not concerned.
    assert get(secret, address="198.51.100.67")[0] == 200


def test_behind_a_proxy_the_forwarded_address_is_counted(org: Organisation, settings: Settings) -> None:
    settings.API_FAILED_KEY_LIMIT = 2
    settings.TRUSTED_PROXY_COUNT = 1
    _key, secret = keys.create_key(org, "real")

    def through_proxy(token: str, forwarded: str) -> int:
        response = Client().get(
            "/v1/models", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded
        )
        return response.status_code

    # The client's own part of the header is not trusted: these are both 192.0.2.10's.
    assert through_proxy("sk-org-x", "1.1.1.1, 192.0.2.10") == 401
    assert through_proxy("sk-org-y", "2.2.2.2, 192.0.2.10") == 401
    assert through_proxy(secret, "3.3.3.3, 192.0.2.10") == 429
    assert through_proxy(secret, "192.0.2.11") == 200


def test_the_command_sets_an_expiry_and_a_rate_limit(org: Organisation) -> None:
    import io

    from django.core.management import CommandError, call_command

    day = (timezone.now() + timedelta(days=3)).date()
    out = io.StringIO()
    call_command(
        "create_api_key",
        "--org",
        "demo",
        "--expires",
        day.isoformat(),
        "--rate-limit",
        "9",
        stdout=out,
        stderr=io.StringIO(),
    )
    key = keys.authenticate(out.getvalue().strip())
    assert key is not None and key.rate_limit == 9 and key.expires == keys.end_of(day, org.time_zone)
    with pytest.raises(CommandError, match="choose today or a later day"):
        call_command("create_api_key", "--org", "demo", "--expires", "2001-01-01", stdout=io.StringIO())
    with pytest.raises(CommandError, match="YYYY-MM-DD"):
        call_command("create_api_key", "--org", "demo", "--expires", "soon", stdout=io.StringIO())
    with pytest.raises(CommandError, match="at least 1"):
        call_command("create_api_key", "--org", "demo", "--rate-limit", "0", stdout=io.StringIO())
    assert ApiKey.objects.count() == 1
