"""Connectors in a real headless Chromium: an admin registers the local MCP server (the SDK's MCPServer)
on the settings page, the composer offers it, and a message sent with it is answered by the demo models
through an agent that asked the connector; the panel shows the connector's action as text.

The server here has its own process, started with CONNECTOR_ALLOWED_HOSTS naming the MCP server and the
token in CONNECTOR_CRM_TOKEN (the shared e2e server knows neither).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.connectors.mcp_server import CrmServer, crm_server
from tests.e2e.test_browser import choose
from tests.live_server import start_server

pytestmark = pytest.mark.slow

TOKEN = "Bearer e2e-crm-token"
DEMO_PACE, DEMO_LATENCY = "0.01", "0.4"
SERVER = """
import sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
call_command("runserver", sys.argv[1], use_reloader=False)
"""


@pytest.fixture(scope="module")
def crm() -> Iterator[CrmServer]:
    with crm_server() as server:
        yield server


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, crm: CrmServer, browser: Any) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("e2e-connectors")
    env = {
        "DJANGO_DEBUG": "1",
        "MEDIA_ROOT": str(folder / "media"),
        "CONNECTOR_ALLOWED_HOSTS": urlsplit(crm.url).netloc,
        "CONNECTOR_CRM_TOKEN": TOKEN,
    }
    with start_server(SERVER, folder, pace=DEMO_PACE, latency=DEMO_LATENCY, env=env) as server:
        yield server.wait_until_up()


@pytest.fixture
def admin(browser: Any, site: str) -> Iterator[Page]:
    context = browser.new_context(base_url=site, viewport={"width": 1280, "height": 900}, locale="en-GB")
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/login/")
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo-password")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{site}/")
    yield page
    context.close()
    assert not errors, errors


def test_register_a_connector_then_ask_through_it(admin: Page, crm: CrmServer) -> None:
    page = admin
    page.goto("/settings/")
    page.click("text=Manage the connectors")
    page.click("text=New connector")
    page.fill("input[name=name]", "crm")
    page.fill("input[name=url]", crm.url)
    # A header from a variable that is not a connector's is refused in the form.
    page.fill("textarea[name=headers_text]", "Authorization: DJANGO_SECRET_KEY")
    page.click("main form button[type=submit]")
    expect(page.locator("main .error").first).to_contain_text("starts with CONNECTOR_")
    expect(page.locator("main")).to_contain_text("Variables set on this server: CONNECTOR_CRM_TOKEN")
    page.fill("textarea[name=headers_text]", "Authorization: CONNECTOR_CRM_TOKEN")
    page.click("main form button[type=submit]")
    page.wait_for_url("**/settings/connectors/crm/")
    # The tools as the server lists them: the read one offered, the write one never.
    expect(page.locator("input[name=tools][value=search_customers]")).to_be_checked()
    expect(page.locator("input[name=tools][value=delete_customer]")).to_be_disabled()

    page.goto("/")
    page.click("#composer details.add-menu summary")
    connectors = page.locator("#composer .add-menu fieldset", has=page.locator("input[value='mcp:crm']"))
    expect(connectors.locator("legend")).to_have_text("Connectors")
    expect(connectors.locator("label")).to_have_text("crm")
    choose(page, ("mcp:crm", "agents"))
    expect(page.locator("#composer .chip-item:not([hidden]) .chip-label")).to_have_text(["crm", "Agents"])
    page.select_option("#composer select[name=level]", "approfondi")
    page.fill("#composer textarea[name=text]", "Where is our customer Acme based?")
    page.click("#composer button[type=submit]")
    run = page.locator("article.answer").last
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(run.locator(".text")).to_contain_text("c-1: Acme SA, Lyon [mcp:crm/search_customers]")
    run.locator(".delegation summary").first.click()
    expect(run.locator(".delegation").first).to_contain_text('crm · search_customers {"query": "customer Acme based"}')
    expect(run.locator(".delegation").first).to_contain_text("mcp:crm")
    assert crm.calls == [("search_customers", {"query": "customer Acme based"})]
    assert crm.headers.get("authorization") == TOKEN
