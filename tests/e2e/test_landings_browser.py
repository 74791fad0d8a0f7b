"""The forced-landing watch in a real headless Chromium: agents run in the chat, the admin reads their share on the
usage page and sets the alert threshold on the budgets page."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import ask, last_run

pytestmark = pytest.mark.slow
Shot = Callable[[str], None]


def test_agents_of_a_run_show_in_the_forced_landing_watch_and_the_admin_sets_its_threshold(
    page: Page, shot: Shot
) -> None:
    ask(page, "Bimbamjob: invoices and payments", kbs=("factures",))
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=30_000)

    page.goto(page.url.split("/c/")[0] + "/settings/usage/")
    section = page.locator("#landings")
    expect(section.locator("h2")).to_have_text("Forced landings")
    row = section.locator("tbody tr", has_text="demo-small")
    expect(row.locator("td").nth(0)).to_have_text("demo-small")
    expect(row.locator("td.share")).to_have_text(re.compile(r"^\d+ % \((no agent last month|[↑↓=].*)\)$"))
    shot("landings-usage")

    section.get_by_role("link", name="Change the threshold").click()
    page.fill("#landing-watch input[name=landing-forced_landing_alert_percent]", "35")
    page.click("#landing-watch button[type=submit]")
    expect(page.locator(".notices")).to_contain_text("an alert when 35 % of a model's agents")
    page.goto(page.url.split("/settings/")[0] + "/settings/usage/")
    expect(page.locator("#landings .hint").first).to_contain_text("Alert at 35 % over at least 20 agents.")
    page.goto(page.url.split("/settings/")[0] + "/settings/budgets/")
    page.fill("#landing-watch input[name=landing-forced_landing_alert_percent]", "20")  # as the other tests expect
    page.click("#landing-watch button[type=submit]")
    expect(page.locator(".notices")).to_contain_text("20 %")
