"""The chat a new user expects, in a real Chromium: a refusal or a failure never breaks the page, phone and
desktop, dark mode, the page follows the answer, Markdown is styled, and axe-core finds nothing moderate or worse."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import FilePayload, Page, expect

from tests.e2e.test_browser import ask, choose, last_run
from tests.e2e.test_csp import _until

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}
AGENTS_ALONE = {
    "en": "The agents tool needs at least one other resource",
    "fr": "Les agents ont besoin d’au moins une autre ressource",
}
BLANK_TITLE = {"en": "A conversation needs a title", "fr": "Une conversation a besoin d’un titre"}
BAD_THRESHOLDS = {
    "en": "Percentages from 1 to 100, separated by commas",
    "fr": "Des pourcentages de 1 à 100, séparés par des virgules",
}
CSRF = {"en": "This page is out of date", "fr": "Cette page n’est plus à jour"}
FAILED = {"en": "The server could not handle this; your message is kept.", "fr": "Le serveur n’a pas pu traiter"}


@pytest.fixture
def tab(browser: Any, server: str, signed_in: dict[str, Any]) -> Iterator[Any]:
    """``tab(viewport=…, color_scheme=…)``: more signed-in tabs, each in its own context, closed at the end."""
    contexts: list[Any] = []

    def open_tab(viewport: dict[str, int] = DESKTOP, **options: Any) -> Page:
        context = browser.new_context(
            base_url=server, storage_state=signed_in, viewport=viewport, locale="en-GB", **options
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page: Page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.errors = errors  # type: ignore[attr-defined]  # the page's script errors, kept on it for the tests to check
        return page

    yield open_tab
    for context in contexts:
        context.close()


def _in(page: Page, language: str) -> None:
    if language == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("html")).to_have_attribute("lang", "fr")


def _page_is_whole(page: Page) -> None:
    """Header, sidebar and styles are still there: the page was not replaced by a fragment."""
    expect(page.locator("header.top .brand")).to_be_visible()
    assert page.locator("link[rel=stylesheet][href*='app.css']").count() == 1
    assert page.evaluate("getComputedStyle(document.querySelector('header.top')).display") == "flex"
    assert page.locator("main").count() == 1 and page.locator("header.top").count() == 1


# Item 1: refusals never break the page ---------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "fr"])
def test_a_refused_message_is_said_next_to_the_composer_and_keeps_the_page_and_text(page: Page, language: str) -> None:
    _in(page, language)
    choose(page, ("agents",))
    page.fill("#composer textarea[name=text]", "Bimbamjob: keep this text")
    with page.expect_response(re.compile(r"/c/new$")) as response:
        page.click("#composer button[type=submit]")
    assert response.value.status == 422
    expect(page.locator("#composer .error")).to_contain_text(AGENTS_ALONE[language])
    _page_is_whole(page)
    expect(page.locator(".sidebar")).to_be_visible()
    expect(page.locator("#composer textarea[name=text]")).to_have_value("Bimbamjob: keep this text")
    assert page.locator("#composer input[value=agents]").is_checked()
    assert page.locator("#composer").count() == 1


# The refusal of a spent month, as billing words it (runs.wording.refusal_text).
SPENT = {"en": "what is left cannot take this request", "fr": "ce qui reste ne suffit pas pour cette demande"}


def _monthly_tokens(page: Page, slug: str, tokens: str | None = None) -> str:
    """The category's monthly tokens on the budgets page; with ``tokens``, saved first."""
    page.goto("/settings/budgets/")
    field = page.locator(f"#categories-form tr:has(code:text-is('{slug}')) input[name$=monthly_tokens]")
    if tokens is not None:
        page.locator("#categories-form").evaluate("el => { el.noValidate = true; }")
        field.fill(tokens)
        page.click("#categories-form button[type=submit]")
        expect(page.locator(".notices li")).to_be_visible()
    return field.input_value()


@pytest.mark.parametrize("language", ["en", "fr"])
def test_a_message_in_a_spent_category_is_refused_in_place(page: Page, language: str) -> None:
    before = _monthly_tokens(page, "administration")
    try:
        assert _monthly_tokens(page, "administration", "1") == "1"
        page.goto("/")
        _in(page, language)
        page.select_option("#composer select[name=category]", "administration")
        page.fill("#composer textarea[name=text]", "Another admin question")
        with page.expect_response(re.compile(r"/c/new$")) as response:
            page.click("#composer button[type=submit]")
        assert response.value.status == 422
        expect(page.locator("#composer .error")).to_contain_text(SPENT[language])
        _page_is_whole(page)
        expect(page.locator(".sidebar")).to_be_visible()
        expect(page.locator("#composer textarea[name=text]")).to_have_value("Another admin question")
        expect(page.locator("#composer select[name=category]")).to_have_value("administration")
    finally:
        _monthly_tokens(page, "administration", before)


@pytest.mark.parametrize("language", ["en", "fr"])
def test_a_blank_title_is_refused_in_place(page: Page, language: str) -> None:
    ask(page, "Zorglub: a title to keep", kbs=("factures",), level="rapide")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    _in(page, language)
    head = page.locator("#conversation-head")
    head.locator("summary").click()
    head.locator("input[name=title]").fill("   ")
    with page.expect_response(re.compile(r"/rename$")) as response:
        head.locator("button[type=submit]").click()
    assert response.value.status == 422
    expect(page.locator("#conversation-head .error")).to_contain_text(BLANK_TITLE[language])
    expect(page.locator("#conversation-head h1")).to_have_text("Zorglub: a title to keep")
    _page_is_whole(page)
    expect(page.locator(".sidebar a[aria-current=page]")).to_have_text("Zorglub: a title to keep")


@pytest.mark.parametrize("language", ["en", "fr"])
def test_a_refused_budgets_form_comes_back_in_place_with_what_was_typed(page: Page, language: str) -> None:
    page.goto("/settings/budgets/")
    _in(page, language)
    field = page.locator("#categories-form input[name$=alert_thresholds]").first
    field.fill("eighty")
    page.evaluate("window.__same = document.querySelector('header.top')")
    with page.expect_response(re.compile(r"/settings/budgets/categories$")) as response:
        page.click("#categories-form button[type=submit]")
    assert response.value.status == 422
    expect(page.locator("#categories-form .errorlist").first).to_contain_text(BAD_THRESHOLDS[language])
    expect(page.locator("#categories-form input[name$=alert_thresholds]").first).to_have_value("eighty")
    _page_is_whole(page)
    assert page.evaluate("window.__same === document.querySelector('header.top')")  # swapped, not reloaded
    expect(page).to_have_url(re.compile(r"/settings/budgets/$"))


def test_a_saved_form_reloads_its_page_with_the_notice(page: Page) -> None:
    page.goto("/settings/budgets/")
    page.click("#time-zone-form button[type=submit]")
    expect(page.locator(".notices li")).to_contain_text("The time zone is saved")
    _page_is_whole(page)


@pytest.mark.parametrize("language", ["en", "fr"])
def test_a_server_error_is_said_in_place_and_keeps_the_text(page: Page, language: str) -> None:
    _in(page, language)
    page.route(re.compile(r"/c/new$"), lambda route: route.fulfill(status=500, body="<h1>Server Error (500)</h1>"))
    page.fill("#composer textarea[name=text]", "Text to keep through a failure")
    page.click("#composer button[type=submit]")
    expect(page.locator("#composer .form-notice")).to_contain_text(FAILED[language])
    expect(page.locator("#composer textarea[name=text]")).to_have_value("Text to keep through a failure")
    _page_is_whole(page)
    assert page.locator("text=Server Error (500)").count() == 0


@pytest.mark.parametrize("language", ["en", "fr"])
def test_a_failed_csrf_check_says_so_next_to_the_form(page: Page, server: str, language: str) -> None:
    _in(page, language)
    page.fill("#composer textarea[name=text]", "Sent with a stale token")
    # Another tab signed in again: the page's token no longer matches the cookie.
    page.context.add_cookies([{"name": "csrftoken", "value": "x" * 32, "url": server}])
    with page.expect_response(re.compile(r"/c/new$")) as response:
        page.click("#composer button[type=submit]")
    assert response.value.status == 403
    expect(page.locator("#composer .form-notice[data-notice=csrf]")).to_contain_text(CSRF[language])
    expect(page.locator("#composer textarea[name=text]")).to_have_value("Sent with a stale token")
    _page_is_whole(page)


def test_an_expired_session_signs_in_again_and_brings_the_draft_back(browser: Any, server: str) -> None:
    context = browser.new_context(base_url=server, viewport=DESKTOP)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo-password")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{server}/")
    ask(page, "Zorglub: a conversation to come back to", kbs=("factures",), level="rapide")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    conversation = page.url
    page.locator("#composer textarea[name=text]").press_sequentially("A draft typed before the session expired")
    context.clear_cookies(name="sessionid")  # the session expired
    page.click("#composer button[type=submit]")
    page.wait_for_url(re.compile(r"/login/\?next="))
    assert page.url.endswith("next=" + conversation.removeprefix(server).replace("/", "%2F"))
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo-password")
    page.click("main form button[type=submit]")
    page.wait_for_url(conversation)
    expect(page.locator("#composer textarea[name=text]")).to_have_value("A draft typed before the session expired")
    # Sent, the draft is forgotten: a reload shows an empty composer.
    page.click("#composer button[type=submit]")
    expect(page.locator(".turn")).to_have_count(2)
    page.reload()
    expect(page.locator("#composer textarea[name=text]")).to_have_value("")
    context.close()


# Item 4: phone and desktop, dark mode ----------------------------------------------------------

WIDE_PAGES = ["/settings/", "/settings/usage/", "/settings/budgets/", "/kb/", "/kb/factures/", "/tasks/", "/tasks/new"]


def _no_horizontal_scroll(page: Page, path: str) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"{path} is {width[0]} px wide in a {width[1]} px window"


def test_at_390_px_no_page_scrolls_sideways_and_the_sidebar_is_behind_its_button(tab: Any, shot: Any) -> None:
    page = tab(PHONE)
    page.goto("/")
    ask(page, "Bimbamjob: invoices, payments and relationship")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=30_000)
    last_run(page).locator(".delegation summary").first.click()
    _no_horizontal_scroll(page, page.url)
    toggle = page.locator("button.menu-toggle")
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.locator("#sidebar a.button")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(toggle).to_be_focused()
    for path in WIDE_PAGES:
        page.goto(path)
        _no_horizontal_scroll(page, path)
    assert page.errors == []


@pytest.mark.parametrize("width", [360, 1920])
def test_from_360_to_1920_px_nothing_scrolls_sideways(tab: Any, width: int) -> None:
    page = tab({"width": width, "height": 800})
    for path in ["/", *WIDE_PAGES]:
        page.goto(path)
        _no_horizontal_scroll(page, path)
    page.goto("/")
    expect(page.locator("#sidebar")).to_be_visible() if width > 768 else expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("button.menu-toggle")).to_be_visible() if width <= 768 else expect(
        page.locator("button.menu-toggle")
    ).to_be_hidden()


def test_an_api_key_is_refused_in_place_and_its_secret_shown_once_created(page: Page) -> None:
    page.goto("/settings/api-keys/")
    page.locator("#api-key-form").evaluate("el => { el.noValidate = true; }")
    with page.expect_response(lambda r: r.request.method == "POST") as response:
        page.click("#api-key-form button[type=submit]")
    assert response.value.status == 422
    expect(page.locator("#api-key-form .error").first).to_be_visible()
    _page_is_whole(page)
    page.fill("#api-key-form input[name=name]", "Reports robot")
    with page.expect_response(lambda r: r.request.method == "POST") as response:
        page.click("#api-key-form button[type=submit]")
    assert response.value.status == 200
    expect(page.locator("code.secret")).to_be_visible()  # shown in the page, once
    _page_is_whole(page)


def test_a_refused_upload_is_said_in_place(page: Page) -> None:
    page.goto("/kb/factures/")
    page.locator("#upload-form").evaluate("el => { el.noValidate = true; }")
    page.set_input_files(
        "#upload-form input[type=file]",
        files=[FilePayload(name="tool.exe", mimeType="application/octet-stream", buffer=b"MZ not a document")],
    )
    with page.expect_response(lambda r: r.request.method == "POST") as response:
        page.click("#upload-form button[type=submit]")
    assert response.value.status == 422
    expect(page.locator("#upload-form .error")).to_be_visible()
    _page_is_whole(page)


def _background(page: Page) -> str:
    value: str = page.evaluate("getComputedStyle(document.body).backgroundColor")
    return value


def test_dark_mode_follows_the_browser_and_a_choice_is_remembered_by_the_server(tab: Any, server: str) -> None:
    page = tab(DESKTOP, color_scheme="dark")
    page.goto("/")
    assert _background(page) == "rgb(20, 23, 28)"  # dark from prefers-color-scheme, no choice made
    toggle = page.locator("button.theme-toggle")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    toggle.click()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    assert _background(page) == "rgb(246, 247, 249)"
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert {c["name"]: c["value"] for c in page.context.cookies()}["theme"] == "light"
    # The server reads the cookie: the next page is light from its first paint, in a dark browser.
    response = page.goto("/settings/")
    assert response is not None and '<html lang="en" data-theme="light">' in response.text()
    toggle.click()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert _background(page) == "rgb(20, 23, 28)"
    light = tab(DESKTOP, color_scheme="light")
    light.goto("/")
    assert _background(light) == "rgb(246, 247, 249)"


# Item 6: scroll --------------------------------------------------------------------------------


def _scroll_state(page: Page) -> dict[str, float]:
    state: dict[str, float] = page.evaluate(
        "({y: window.scrollY, end: document.documentElement.scrollHeight - window.innerHeight})"
    )
    return state


def test_a_conversation_opens_at_its_latest_turn_and_the_page_follows_the_answer(tab: Any) -> None:
    page = tab({"width": 1000, "height": 600})
    page.goto("/")
    for n in range(2):
        ask(page, f"Bimbamjob: invoices, payments and relationship ({n})")
        expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=30_000)
    page.reload()
    state = _scroll_state(page)
    assert state["end"] > 300 and state["y"] >= state["end"] - 2, state  # at the end, not the top
    # While the answer streams, the page keeps to its end...
    ask(page, "Bimbamjob: invoices, payments and relationship (2)")
    run = last_run(page)
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    expect(run.locator(".delegation[data-status=ok]")).to_have_count(2, timeout=30_000)
    state = _scroll_state(page)
    assert state["y"] >= state["end"] - 90, state
    jump = page.locator("#jump-latest")
    expect(jump).to_be_hidden()
    # ...until the user scrolls up: it stays where they are, and "Jump to latest" appears.
    page.mouse.wheel(0, -2000)
    _until(page, "window.scrollY < document.documentElement.scrollHeight - window.innerHeight - 200")
    expect(jump).to_be_visible(timeout=20_000)
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    assert _scroll_state(page)["y"] < _scroll_state(page)["end"] - 200
    jump.click()
    _until(page, "window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2")
    expect(jump).to_be_hidden()


# Item 10: rendering ----------------------------------------------------------------------------

SAMPLE = """## Invoices

| Invoice | Amount |
|---|---|
| F-2024-001 | 1 200 € |

> A quoted passage.

- first
- second

```python
def late(days):  # a comment long enough to need a horizontal scroll inside its block, not the page's own
    return days > 30
```
"""


def test_markdown_is_styled_tables_code_quotes_and_long_code_scrolls_inside(tab: Any, shot: Any) -> None:
    from assistant.chat.rendering import render_markdown

    html = str(render_markdown(SAMPLE))
    page = tab(PHONE)
    page.goto("/")
    ask(page, "Zorglub", kbs=("factures",), level="rapide")
    run = last_run(page)
    expect(run).to_have_attribute("data-status", "ok", timeout=20_000)
    run.locator(".text").evaluate("(el, html) => { el.innerHTML = html; }", html)
    styles = page.evaluate(
        """() => {
        const text = document.querySelector('article.answer .text');
        const css = (sel, prop) => getComputedStyle(text.querySelector(sel))[prop];
        const pre = text.querySelector('pre.highlight');
        return {
          td: css('td', 'borderTopStyle'), heading: text.querySelector('h4') !== null,
          quote: css('blockquote', 'borderLeftStyle'), preBg: css('pre', 'backgroundColor'),
          preScroll: css('pre', 'overflowX'), keyword: css('pre .k', 'color'), comment: css('pre .c1', 'color'),
          wider: pre.scrollWidth > pre.clientWidth, list: css('ul', 'paddingLeft'),
          wrapper: css('.table-scroll', 'overflowX'),
        };
    }"""
    )
    assert styles["td"] == "solid" and styles["quote"] == "solid" and styles["heading"]
    assert styles["preBg"] not in ("rgba(0, 0, 0, 0)", "transparent") and styles["preScroll"] == "auto"
    assert styles["keyword"] != styles["comment"]  # highlighted by Pygments' classes
    assert styles["wider"] and styles["wrapper"] == "auto"
    _no_horizontal_scroll(page, "the answer with long code")


# Item 12: accessibility ------------------------------------------------------------------------


# Counts, from now on, the answers' live regions removed from the page (each push replacing one) and
# the changes made inside them (the answer growing).
WATCH_ANSWERS = """() => {
  window.__replaced = 0; window.__grown = 0;
  new MutationObserver((records) => {
    for (const r of records) {
      for (const n of r.removedNodes) if (n.nodeType === 1 && n.matches('.text[aria-live]')) window.__replaced += 1;
      const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      if (el && el.closest('.text[aria-live]')) window.__grown += 1;
    }
  }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
}"""


def test_the_answer_is_a_live_region_that_stays_while_it_streams(page: Page) -> None:
    ask(page, "Zorglub: a first question", kbs=("factures",), level="rapide")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    page.add_init_script("document.addEventListener('htmx:wsOpen', () => { window.__wsOpen = true; });")
    page.reload()
    _until(page, "window.__wsOpen === true")  # following the conversation live
    page.evaluate(WATCH_ANSWERS)  # on the conversation's page, which the next message does not reload
    with page.expect_response(re.compile(r"/send$")) as sent:
        ask(page, "Bimbamjob: invoices, payments and relationship")
    assert sent.value.status == 200
    expect(page.locator(".turn")).to_have_count(2)
    run = last_run(page)
    expect(run.locator(".text")).to_have_attribute("aria-live", "polite")
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(run.locator(".text")).to_contain_text("Here is what the documents say")
    # The answer grew in place, many times, and its region was never replaced while it streamed.
    counts = page.evaluate("[window.__grown, window.__replaced]")
    assert counts[0] > 5 and counts[1] == 0, counts


def test_there_is_a_favicon_and_keyboard_focus_is_visible(page: Page) -> None:
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon and page.request.get(icon).status == 200
    assert page.request.get("/favicon.ico").status == 200  # for the pages that name no icon
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid", outline


AXE_PAGES = ["/", "/settings/", "/settings/usage/", "/settings/budgets/", "/kb/", "/kb/factures/"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1400"])
def test_axe_finds_no_serious_or_critical_violation(tab: Any, scheme: str, viewport: dict[str, int]) -> None:
    """axe-core (as axe-playwright-python bundles it) on the chat with an answer, settings, usage and budgets.

    Its script is evaluated through the DevTools protocol, which the page's Content-Security-Policy does
    not govern, so the page keeps its policy (no bypass_csp)."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    page = tab(viewport, color_scheme=scheme)
    page.goto("/")

    def violations(where: str, impacts: tuple[str, ...] = ("serious", "critical")) -> None:
        bad = [
            (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:5])
            for v in axe.run(page).response["violations"]
            if v["impact"] in impacts
        ]
        assert bad == [], (where, scheme, viewport, bad)

    # The chat pages: not even a moderate finding (the new chat with its "+" menu open, then a conversation).
    chat = ("moderate", "serious", "critical")
    page.click("#composer details.add-menu summary")
    violations("new chat, + menu open", chat)
    page.keyboard.press("Escape")
    ask(page, "Bimbamjob: invoices, payments and relationship", kbs=("factures",))
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=30_000)
    last_run(page).locator(".delegation summary").first.click()
    for path in AXE_PAGES:
        if path != "/":
            page.goto(path)
        violations(path, chat)  # chat, settings, usage, budgets, knowledge bases: nothing moderate or worse
    assert page.errors == []


# Every htmx form of the admin and user pages -------------------------------------------------

FORMS = [
    # (page, form, fill: {field: value}, the refusal's words)
    ("/settings/", "#levels-form", {"input[name$=main_rounds]": "0"}, "greater than or equal to"),
    ("/kb/new", "#kb-form", {"input[name=name]": "   "}, "Give the base a name."),
    ("/tasks/new", "#task-edit", {"input[name=name]": "Weekly", "textarea[name=prompt]": "   "}, ""),
]


@pytest.mark.parametrize(("path", "form", "fill", "words"), FORMS, ids=["settings", "knowledge", "tasks"])
def test_every_form_is_refused_in_place(page: Page, path: str, form: str, fill: dict[str, str], words: str) -> None:
    page.goto(path)
    page.locator(form).evaluate("el => { el.noValidate = true; }")  # the server's checks, not the browser's
    for selector, value in fill.items():
        page.locator(f"{form} {selector}").first.fill(value)
    page.evaluate("window.__same = document.querySelector('header.top')")
    with page.expect_response(lambda r: r.request.method == "POST") as response:
        page.locator(f"{form} button[type=submit]").first.click()
    assert response.value.status == 422
    expect(page.locator(f"{form} .error, {form} .errorlist").first).to_be_visible()
    if words:
        expect(page.locator(form)).to_contain_text(words)
    for selector, value in fill.items():
        if value.strip():
            expect(page.locator(f"{form} {selector}").first).to_have_value(value)
    _page_is_whole(page)
    assert page.evaluate("window.__same === document.querySelector('header.top')")


# Screenshots for the README: `UPDATE_SCREENSHOTS=1` writes them to docs/screenshots/ ------------


QUESTION = {"en": "Bimbamjob: invoices, payments and relationship", "fr": "Bimbamjob : factures, paiements et relation"}


def test_screenshots_of_the_chat_on_desktop_phone_and_dark(tab: Any) -> None:
    """1400 and 390 px, light and dark, English and French: four agents at work (desktop), the "+" menu over an
    answer (dark), the delegation lines and the composer (phone)."""
    import os
    from pathlib import Path

    from tests.e2e.conftest import ARTIFACTS

    folder = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
    if not os.environ.get("UPDATE_SCREENSHOTS"):
        folder = ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    kbs = ("contrats", "factures", "comptes-rendus", "rapports")
    for name, viewport, scheme, language in (
        ("chat-1400", DESKTOP, "light", "en"),
        ("chat-390", PHONE, "light", "fr"),
        ("chat-dark", DESKTOP, "dark", "fr"),
        ("chat-390-dark", PHONE, "dark", "en"),
    ):
        page = tab(viewport, color_scheme=scheme)
        page.goto("/")
        _in(page, language)
        ask(page, QUESTION[language], kbs=kbs)
        page.wait_for_url(re.compile(r"/c/\d+/$"))
        run = last_run(page)
        if scheme == "light":  # the agents at work: each line, its latest action, the composer pinned below
            _until(page, "document.querySelectorAll('.delegation[data-status=running] .actions.live li').length === 4")
            if viewport == PHONE:
                run.locator(".delegation").first.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(folder / f"{name}.png"))
        expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
        if scheme == "dark":  # an answer, then the "+" menu of resources open over it
            page.click("#composer details.add-menu summary")
            page.screenshot(path=str(folder / f"{name}.png"))
        if language == "fr":  # the next tests' language
            page.click("header button[lang=en]")
            expect(page.locator("html")).to_have_attribute("lang", "en")


OTHER_PAGES = [
    "/settings/api-keys/",
    "/settings/profiles/new",
    "/settings/members/",
    "/settings/audit/",
    "/settings/connectors/",
    "/settings/usage/mine/",
    "/kb/",
    "/kb/factures/",
    "/kb/new",
    "/tasks/",
    "/tasks/new",
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_moderate_or_worse_on_the_other_pages(tab: Any, scheme: str) -> None:
    """The other admin and user pages, on a phone, light and dark: not even a moderate finding, as the main pages."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    page = tab(PHONE, color_scheme=scheme)
    for path in OTHER_PAGES:
        page.goto(path)
        violations = axe.run(page).response["violations"]
        bad = [
            (v["id"], [n["target"] for n in v["nodes"]][:5])
            for v in violations
            if v["impact"] in ("moderate", "serious", "critical")
        ]
        assert bad == [], (path, scheme, bad)
