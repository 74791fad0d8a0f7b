"""The settings a deployment gets from its environment: no public key outside this machine, cookies never
sent in clear in production, and what `make run` uses unchanged. Each case loads the settings in a fresh
interpreter, as a server would start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "from django.conf import settings as s; "
    "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECRET_KEY.startswith('dev-only'))"
)


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {SHOW}"],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "assistant.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_run_keeps_debug_the_development_key_and_plain_http_cookies() -> None:
    done = _settings()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False", "True"]


@pytest.mark.parametrize("hosts", ["assistant.example.com", "127.0.0.1,*", "10.0.0.5"])
def test_the_development_key_is_refused_for_hosts_other_than_this_machine(hosts: str) -> None:
    # DJANGO_DEBUG forgotten (it defaults to on): the public key would let anyone forge a session.
    done = _settings(DJANGO_ALLOWED_HOSTS=hosts)
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in done.stderr
    assert _settings(DJANGO_ALLOWED_HOSTS=hosts, DJANGO_SECRET_KEY="k" * 50).returncode == 0


def test_production_cookies_are_secure_unless_plain_http_is_asked_for() -> None:
    production = {"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": "k" * 50, "DJANGO_ALLOWED_HOSTS": "a.example"}
    done = _settings(**production)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "True", "False"]
    plain = _settings(**production, DJANGO_SECURE_COOKIES="false")
    assert plain.stdout.split() == ["False", "False", "False", "False"]
    # Without a key, production does not start at all.
    assert "DJANGO_SECRET_KEY must be set" in _settings(DJANGO_DEBUG="false").stderr
