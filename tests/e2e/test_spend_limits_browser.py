"""Spend limits in a real headless Chromium: an admin gives themself a hard cap in Settings → Members; at 80 % the
composer shows a banner; over the cap a message is refused next to the composer (the text kept, nothing saved);
in English and in French, at 1400 and 390 px. The month's spend is set in the server's database between the steps
(what the runs cost is the other tests' business), then the limit is taken off again for the tests that follow."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_browser import last_run
from tests.live_server import LiveServer

pytestmark = pytest.mark.slow

QUESTION = "What does contract C-2024-002 cover?"


def _set_spent(server_process: LiveServer, eur: float) -> None:
    """The demo admin's month, as if their requests had cost ``eur``."""
    with sqlite3.connect(server_process.log_path.parent / "db.sqlite3", timeout=10) as db:
        changed = db.execute(
            "UPDATE budgets_spendmonth SET used_eur = ? WHERE api_key_id IS NULL AND user_id = "
            "(SELECT id FROM auth_user WHERE username = 'demo')",
            (eur,),
        ).rowcount
    assert changed == 1


def _set_limit(page: Page, mode: str, amount: str) -> None:
    page.goto("/settings/members/")
    row = page.locator("tr[data-member=demo]")
    row.locator("select").select_option(mode)
    row.locator("input[type=number]").fill(amount)
    row.get_by_role("button").click()
    expect(page.locator(".notices")).to_contain_text("demo")


@pytest.fixture
def capped(page: Page) -> Iterator[Page]:
    _set_limit(page, "hard", "2")
    yield page
    _set_limit(page, "", "")  # back to the organisation's default (none), as the other tests expect


def _shots(browser: Any, server: str, signed_in: dict[str, Any], name: str, language: str) -> None:
    """The new-chat page at 1400 and 390 px in ``language``: the banner (or the refusal) next to the composer."""
    for width, height in ((1400, 900), (390, 844)):
        context = browser.new_context(
            base_url=server, storage_state=signed_in, viewport={"width": width, "height": height}, locale="en-GB"
        )
        context.add_cookies([{"name": "django_language", "value": language, "url": server}])
        tab = context.new_page()
        tab.goto("/")
        banner = tab.locator("#composer .spend-banner")
        expect(banner).to_be_visible()
        box = banner.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width  # within the screen
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"spend-{name}-{language}-{width}.png"))
        context.close()


def test_a_hard_cap_shows_a_banner_at_80_percent_then_refuses_next_to_the_composer(
    capped: Page, server_process: LiveServer, browser: Any, server: str, signed_in: dict[str, Any]
) -> None:
    page = capped
    # A first question under the limit runs: the month is counted from then on.
    page.goto("/")
    page.fill("#composer textarea[name=text]", QUESTION)
    page.select_option("#composer select[name=level]", "rapide")
    page.click("#composer button[type=submit]")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=30_000)

    _set_spent(server_process, 1.70)
    page.goto("/")
    banner = page.locator("#composer .spend-banner")
    expect(banner).to_contain_text("You have spent 1.70 EUR of your monthly spend limit of 2.00 EUR (85 %).")
    expect(banner).to_contain_text("At 100 % your requests are refused")
    _shots(browser, server, signed_in, "banner", "en")
    _shots(browser, server, signed_in, "banner", "fr")

    # Over the cap: refused next to the composer, the text kept, no new turn.
    _set_spent(server_process, 1.99)
    page.goto("/")
    page.fill("#composer textarea[name=text]", QUESTION)
    page.click("#composer button[type=submit]")
    refusal = page.locator("#composer-notice .error")
    expect(refusal).to_contain_text("You have spent 1.99 EUR of your monthly spend limit of 2.00 EUR (99 %)")
    expect(refusal).to_contain_text("midnight (Europe/Paris)")
    expect(page.locator("#composer textarea[name=text]")).to_have_value(QUESTION)
    expect(page.locator("article.answer")).to_have_count(0)
    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        box = refusal.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
        page.screenshot(path=str(ARTIFACTS / f"spend-refused-en-{width}.png"))

    # In French, the refusal and the banner at 100 %.
    _set_spent(server_process, 2.00)
    page.context.add_cookies([{"name": "django_language", "value": "fr", "url": server}])
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto("/")
    expect(page.locator("#composer .spend-banner")).to_contain_text(
        "Vous avez dépensé 2,00 EUR de votre limite de dépenses mensuelle de 2,00 EUR (100 %)"
    )
    page.fill("#composer textarea[name=text]", QUESTION)
    page.click("#composer button[type=submit]")
    expect(page.locator("#composer-notice .error")).to_contain_text("Vous avez dépensé 2,00 EUR")
    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        page.screenshot(path=str(ARTIFACTS / f"spend-refused-fr-{width}.png"))
    _shots(browser, server, signed_in, "full", "fr")

    # My usage says the same month.
    page.goto("/settings/usage/mine/")
    expect(page.locator("#my-spend .spend-total")).to_contain_text("2,00 EUR")
    expect(page.locator("#my-spend .spend-total")).to_contain_text("(100 %)")
    page.screenshot(path=str(ARTIFACTS / "spend-my-usage-fr-1400.png"), full_page=True)
    page.context.add_cookies([{"name": "django_language", "value": "en", "url": server}])


@pytest.mark.parametrize("language", ["en", "fr"])
def test_the_members_page_and_the_usage_pages_fit_1400_and_390(
    browser: Any, server: str, signed_in: dict[str, Any], language: str
) -> None:
    for width, height in ((1400, 900), (390, 844)):
        context = browser.new_context(
            base_url=server, storage_state=signed_in, viewport={"width": width, "height": height}, locale="en-GB"
        )
        context.add_cookies([{"name": "django_language", "value": language, "url": server}])
        tab = context.new_page()
        for path, section, name in (
            ("/settings/members/", "#member-limits", "members"),
            ("/settings/usage/", "#spend-limits", "usage"),
            ("/settings/usage/mine/", "#my-spend", "my-usage"),
        ):
            tab.goto(path)
            expect(tab.locator(section)).to_be_visible()
            assert tab.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scrolling
            ARTIFACTS.mkdir(exist_ok=True)
            tab.screenshot(path=str(ARTIFACTS / f"spend-{name}-{language}-{width}.png"), full_page=True)
        context.close()
