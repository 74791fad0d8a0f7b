"""Every page's security headers (a Content-Security-Policy with no inline script or style, no sniffing,
no framing, no referrer to other sites, its own browsing context group), the templates that policy needs
(nothing inline), and the TLS settings read from the environment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from pytest_django import Settings

ROOT = Path(__file__).resolve().parents[2]
POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "connect-src": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "object-src": "'none'",
}


def _directives(header: str) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.split(" ", 1)[1] for d in (p.strip() for p in header.split(";")) if d}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/login/", "/", "/settings/", "/settings/budgets/", "/settings/usage/", "/kb/", "/tasks/"]
)
def test_every_page_has_the_policy_and_the_headers(path: str) -> None:
    call_command("load_demo", verbosity=0)
    client = Client()
    if path != "/login/":
        assert client.login(username="demo", password="demo-password")
    response = client.get(path)
    assert response.status_code == 200
    assert _directives(response["Content-Security-Policy"]) == POLICY
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "Strict-Transport-Security" not in response  # only when DJANGO_HSTS_SECONDS says so, over HTTPS


INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "an inline <script>"),
    (re.compile(r"<style\b", re.I), "a <style> element"),
    (re.compile(r"\sstyle\s*=", re.I), "a style attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "an inline event handler"),
    (re.compile(r"\shx-on", re.I), "an hx-on attribute (htmx evaluates it)"),
    (re.compile(r"javascript:", re.I), "a javascript: address"),
]


def test_no_template_has_an_inline_script_style_or_handler() -> None:
    found = []
    for template in sorted((ROOT / "templates").rglob("*.html")) + sorted(
        (ROOT / "assistant").rglob("templates/**/*.html")
    ):
        text = template.read_text()
        for pattern, what in INLINE:
            found += [f"{template.relative_to(ROOT)}: {what}: {m.group(0)!r}" for m in pattern.finditer(text)]
    assert not found, found


def test_the_htmx_configuration_keeps_to_the_policy() -> None:
    base = (ROOT / "templates" / "base.html").read_text()
    meta = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", base)
    assert meta is not None
    config = json.loads(meta.group(1))
    assert config["includeIndicatorStyles"] is False  # htmx would add an inline <style>
    assert config["allowEval"] is False and config["allowScriptTags"] is False
    assert "{% htmx_script" not in base  # its debug helper evaluates the scripts of error pages


def _settings(**env: str) -> dict[str, object]:
    code = (
        "import json; from assistant import settings as s; print(json.dumps([s.SECURE_HSTS_SECONDS, "
        "s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_SSL_REDIRECT, s.SECURE_PROXY_SSL_HEADER]))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=base | env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    hsts, subdomains, redirect, proxy = json.loads(out.stdout)
    return {"hsts": hsts, "subdomains": subdomains, "redirect": redirect, "proxy": proxy}


def test_tls_settings_come_from_the_environment() -> None:
    assert _settings() == {"hsts": 0, "subdomains": False, "redirect": False, "proxy": None}
    assert _settings(
        DJANGO_HSTS_SECONDS="31536000",
        DJANGO_HSTS_INCLUDE_SUBDOMAINS="true",
        DJANGO_SECURE_SSL_REDIRECT="true",
        DJANGO_SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto",
    ) == {"hsts": 31536000, "subdomains": True, "redirect": True, "proxy": ["HTTP_X_FORWARDED_PROTO", "https"]}


@pytest.mark.django_db
def test_hsts_is_sent_over_https_when_configured(settings: Settings) -> None:
    call_command("load_demo", verbosity=0)
    settings.SECURE_HSTS_SECONDS = 3600
    response = Client().get("/login/", secure=True)
    assert response["Strict-Transport-Security"] == "max-age=3600"
