"""What a careful reader checks, in a real Chromium at 1400 and 390 px, in English and French: every admin table fits
its card (on a phone, each row is a block of "label: value" lines), and no column is reachable only by scrolling
sideways; French pages say «jetons», never "tokens"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import choose

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}
VIEWPORTS = {"390": PHONE, "1400": DESKTOP}

ADMIN_TABLES = [
    "/settings/",
    "/settings/budgets/",
    "/settings/usage/",
    "/settings/api-keys/",
    "/settings/audit/",
    "/kb/factures/",
    "/tasks/",
]


@pytest.fixture
def reader(browser: Any, server: str, signed_in: dict[str, Any]) -> Iterator[Any]:
    """``reader(width, language, scheme="light")``: a signed-in tab at that width, in that language."""
    contexts: list[Any] = []

    def open_tab(width: str, language: str, scheme: str = "light") -> Page:
        context = browser.new_context(
            base_url=server,
            storage_state=signed_in,
            viewport=VIEWPORTS[width],
            locale="fr-FR" if language == "fr" else "en-GB",
            color_scheme=scheme,
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page: Page = context.new_page()
        page.goto("/")
        if language == "fr":
            page.click("header button[lang=fr]")
        else:
            page.click("header button[lang=en]")
        expect(page.locator("html")).to_have_attribute("lang", language)
        return page

    yield open_tab
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def admin_rows(browser: Any, server: str, signed_in: dict[str, Any]) -> None:
    """A row in each admin table that starts empty: an API key and a scheduled task (and their audit entries)."""
    context = browser.new_context(base_url=server, storage_state=signed_in)
    page = context.new_page()
    page.goto("/settings/api-keys/")
    if not page.locator("table.keys").count():
        page.fill("#api-key-form input[name=name]", "Reporting (a tool of the finance team)")
        page.click("#api-key-form button[type=submit]")
        expect(page.locator("table.keys")).to_be_visible()
    page.goto("/tasks/")
    if not page.locator("table.tasks").count():
        page.goto("/tasks/new")
        page.fill("#task-edit input[name=name]", "Monday digest of the late invoices")
        page.fill("#task-edit textarea[name=prompt]", "Which invoices are late?")
        page.fill("#task-edit input[name=schedule]", "0 7 * * 1")
        with page.expect_response(lambda r: r.request.method == "POST"):
            page.click("#task-edit button[type=submit]")
        page.wait_for_load_state("networkidle")  # the saved task's page, which htmx follows to, swapped in first
        page.goto("/tasks/")
        expect(page.locator("table.tasks")).to_be_visible()
    context.close()


def overflowing(page: Page) -> list[str]:
    """The tables wider than the box that holds them, and the page if wider than the window."""
    found: list[str] = page.evaluate(
        """() => {
            const out = [];
            for (const table of document.querySelectorAll("main table")) {
                const box = table.closest(".table-scroll") || table.parentElement;
                if (box.scrollWidth > box.clientWidth + 1 || table.getBoundingClientRect().right > box.getBoundingClientRect().right + 1)
                    out.push(`${table.className || "table"} ${Math.round(table.scrollWidth)} > ${box.clientWidth}`);
            }
            if (document.documentElement.scrollWidth > window.innerWidth) out.push(`page ${document.documentElement.scrollWidth}`);
            return out;
        }"""
    )
    return found


@pytest.mark.parametrize(("width", "language"), [("1400", "fr"), ("390", "fr"), ("1400", "en"), ("390", "en")])
@pytest.mark.usefixtures("admin_rows")
def test_admin_tables_fit_their_cards_and_stack_on_a_phone(reader: Any, width: str, language: str) -> None:
    page = reader(width, language)
    for path in ADMIN_TABLES:
        page.goto(path)
        assert overflowing(page) == [], (path, width, language)
        if language == "fr":  # one word for tokens, the glossary's
            assert "token" not in page.inner_text("main").lower(), path
        tables = page.locator("main table")
        assert tables.count() > 0, path
        for table in tables.all():
            # Every header names its column (no empty one), and every cell of a phone's stacked row says its label.
            assert all(text.strip() for text in table.locator("thead th").all_text_contents()), path
            if width == "390":
                labels = table.evaluate(
                    """t => [...t.querySelectorAll("tbody td")]
                        .filter(td => td.colSpan === 1 && td.innerText.trim() && !td.querySelector("form"))
                        .map(td => getComputedStyle(td, "::before").content)"""
                )
                assert labels and all(label not in ("none", "normal", '""') for label in labels), (path, labels)
                assert table.evaluate("t => getComputedStyle(t.querySelector('tbody tr')).display") == "block", path


EVERY_PAGE = [
    "/",
    "/settings/",
    "/settings/budgets/",
    "/settings/usage/",
    "/settings/usage/mine/",
    "/settings/members/",
    "/settings/api-keys/",
    "/settings/audit/",
    "/settings/connectors/",
    "/settings/connectors/new",
    "/settings/profiles/new",
    "/kb/",
    "/kb/new",
    "/kb/factures/",
    "/kb/factures/edit",
    "/tasks/",
    "/tasks/new",
    "/c/search?q=Bimbamjob",
]
# The banner when the server itself is down promises nothing about the run; the way back from a document.
SERVER_DOWN = {"en": "The server cannot be reached", "fr": "Le serveur est injoignable"}
BACK = {"en": "Back to the conversation", "fr": "Retour à la conversation"}
SEARCHED = {
    "en": re.compile(r"^Searched “[^“”:]+” in Invoices: \d+ results?$"),
    "fr": re.compile(r"^Recherche de « [^«»:]+ » dans Factures : \d+ résultats?$"),
}


@pytest.mark.parametrize(("width", "language"), [("1400", "en"), ("390", "fr")])
def test_every_page_has_its_h1_skip_links_lead_to_the_conversation_and_composer_and_a_search_names_its_base(
    reader: Any, width: str, language: str
) -> None:
    page = reader(width, language)
    for path in EVERY_PAGE:
        page.goto(path)
        expect(page.locator("h1")).to_have_count(1)
    page.goto("/")
    # The first two stops of the keyboard: to the conversation, to the composer (which then takes the next Tab).
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link").first).to_be_focused()
    expect(page.locator(".skip-link").first).to_be_visible()
    page.keyboard.press("Tab")
    to_composer = page.locator(".skip-link[href='#composer']")
    expect(to_composer).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("document.getElementById('composer').contains(document.activeElement)")
    # A search of the main model, in the timeline: the query alone and the base by its name, in the reader's words.
    choose(page, ("kb:factures",))
    page.fill("#composer textarea[name=text]", "Bimbamjob invoices" if language == "en" else "Factures de Bimbamjob")
    page.click("#composer button[type=submit]")
    run = page.locator("article.answer").last
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(run.locator(".main-action").first).to_have_text(SEARCHED[language])
    expect(page.locator("h1")).to_have_count(1)
    down = page.locator("#connection").get_attribute("data-down") or ""
    assert down.startswith(SERVER_DOWN[language]) and not re.search(r"goes on|continue", down), down
    # A source opens its document's page, which leads back to the conversation that opened it.
    conversation = page.url
    run.locator(".sources a[href^='/documents/']").first.click()
    expect(page.locator("h1")).to_have_count(1)
    assert overflowing(page) == []
    page.get_by_role("link", name=BACK[language]).click()
    page.wait_for_url(re.compile(re.escape(conversation.split("#")[0]) + "#turn-"))  # at the turn that opened it
    expect(page.locator("article.answer").last).to_have_attribute("data-status", "ok")


@pytest.mark.parametrize(("width", "language"), [("1400", "fr"), ("390", "en")])
def test_the_time_zone_is_found_by_its_city_grouped_by_region_and_the_browser_s_zone_is_one_click_away(
    browser: Any, server: str, signed_in: dict[str, Any], width: str, language: str
) -> None:
    context = browser.new_context(
        base_url=server, storage_state=signed_in, viewport=VIEWPORTS[width], timezone_id="Asia/Tokyo"
    )
    page = context.new_page()
    page.goto("/")
    page.click(f"header button[lang={language}]")
    page.goto("/settings/budgets/")
    zones = page.locator("#time-zone select")
    assert page.locator("#time-zone optgroup").count() >= 8  # by region, not ~600 zones in a row
    expect(page.locator("#time-zone optgroup").filter(has_text="Paris")).to_have_attribute("label", "Europe")
    expect(page.locator(f"#time-zone optgroup[label='{'Asie' if language == 'fr' else 'Asia'}']")).to_have_count(1)
    page.fill("#zone-search", "new york")
    expect(zones).to_have_value("America/New_York")
    assert zones.locator("option:not([hidden])").count() == 1
    use = page.locator("#time-zone .zone-browser")
    expect(use).to_contain_text("Asia/Tokyo")
    use.click()
    expect(zones).to_have_value("Asia/Tokyo")
    context.close()


WHEN_TASKS_RUN = {
    "en": "On this server, tasks run only when someone presses “Run now”",
    "fr": "Sur ce serveur, les tâches ne s’exécutent que quand quelqu’un clique sur « Exécuter maintenant »",
}


@pytest.mark.parametrize(("width", "language"), [("1400", "fr"), ("390", "en")])
@pytest.mark.usefixtures("admin_rows")
def test_the_scheduled_tasks_pages_say_in_product_words_when_tasks_run(reader: Any, width: str, language: str) -> None:
    """The server of `make run` (no background workers): the list and the form say that tasks run on “Run now”
    only, in the reader's words; nothing sends them to a README or names the machinery."""
    page = reader(width, language)
    for path in ("/tasks/", "/tasks/new"):
        page.goto(path)
        notice = page.locator("main .notice.when")
        expect(notice).to_contain_text(WHEN_TASKS_RUN[language])
        text = page.inner_text("main")
        assert not re.search(r"README|Celery|RUNS_EXECUTOR|make run", text, re.IGNORECASE), (path, text)
        assert overflowing(page) == [], path
