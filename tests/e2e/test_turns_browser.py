"""The composer (Enter, Send becomes Stop, the queue, the limit), turns (Copy, Edit, Regenerate, previous versions,
code blocks), conversation search and export, the background tab's title, and sources that open: in Chromium, in
English and French."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import ask, choose, last_run

pytestmark = pytest.mark.slow
Shot = Callable[[str], None]

TEXTS: dict[str, dict[str, str | re.Pattern[str]]] = {
    "en": {
        "send": "Send",
        "stop": "Stop",
        "queued": "Queued",
        "left": "characters left",
        "limit": "at most 32,000 characters",
        "copy": "Copy",
        "copied": "Copied",
        "edit": "Edit",
        "resend": "Save and resend",
        "regenerate": "Regenerate",
        "versions": "Previous version (1)",
        "copy_code": "Copy code",
    },
    "fr": {
        "send": "Envoyer",
        "stop": "Arrêter",
        "queued": "En attente",
        "left": "caractères restants",
        "limit": re.compile(r"au plus 32\D?000 caractères"),  # French digits grouping (32 000)
        "copy": "Copier",
        "copied": "Copié",
        "edit": "Modifier",
        "resend": "Enregistrer et renvoyer",
        "regenerate": "Régénérer",
        "versions": "Version précédente (1)",
        "copy_code": "Copier le code",
    },
}


def _language(page: Page, lang: str) -> None:
    if lang == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("html")).to_have_attribute("lang", "fr")


def _until(page: Page, expression: str, timeout: float = 20) -> None:
    """Polls through CDP (``wait_for_function`` evaluates strings in the page, which the policy refuses)."""
    for _ in range(int(timeout * 10)):
        if page.evaluate(expression):
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"never true: {expression}")


def _back(page: Page) -> None:
    page.click("header button[lang=en]")
    expect(page.locator("html")).to_have_attribute("lang", "en")


def _in_view(page: Page, selector: str) -> None:
    """The element is inside the window and on top there: nothing (the pinned composer, say) covers its middle."""
    seen = page.locator(selector).evaluate(
        """el => { const r = el.getBoundingClientRect(); const x = r.left + r.width / 2, y = r.top + r.height / 2;
                   const top = document.elementFromPoint(x, y);
                   return r.top >= 0 && r.bottom <= innerHeight && !!top && el.contains(top); }"""
    )
    assert seen, f"{selector} is out of sight or covered"


@pytest.mark.parametrize(("lang", "width"), [("en", 1400), ("fr", 390)])
def test_composer_enter_sends_stop_during_a_run_and_a_queued_message(
    page: Page, shot: Shot, lang: str, width: int
) -> None:
    t = TEXTS[lang]
    page.set_viewport_size({"width": width, "height": 900 if width > 390 else 844})
    _language(page, lang)
    box = page.locator("#composer textarea[name=text]")
    # Shift+Enter makes a new line; Enter while an input method composes does nothing.
    box.fill("Bimbamjob: invoices")
    box.press("Shift+Enter")
    box.press_sequentially("and payments")
    assert box.input_value() == "Bimbamjob: invoices\nand payments"
    box.evaluate("b => b.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', isComposing: true, bubbles: true}))")
    page.wait_for_timeout(300)
    assert "/c/" not in page.url
    # Enter sends, with the settings chosen (maximal, one base and agents).
    choose(page, ("kb:factures", "agents"))
    page.select_option("#composer select[name=level]", "maximal")
    box.press("Enter")
    page.wait_for_url(re.compile(r"/c/\d+/$"))
    run = last_run(page)
    expect(run).to_have_attribute("data-status", "running")
    # During the run, Send is Stop; the composer kept the choices.
    stop = page.locator("#composer button.composer-stop")
    expect(stop).to_be_visible()
    expect(stop).to_have_text(t["stop"])
    expect(page.locator("#composer button.send")).to_be_hidden()
    expect(page.locator("#composer select[name=level]")).to_have_value("maximal")
    expect(page.locator("#composer input[value='kb:comptes-rendus']")).not_to_be_checked()
    # A message written now is queued on the server, shown above the composer in view; it survives a reload.
    box = page.locator("#composer textarea[name=text]")
    box.press_sequentially("And Tamaris?")  # typed: the page keeps it as a draft meanwhile
    expect(page.locator("#composer button.send")).to_be_visible()
    box.press("Enter")
    queued = page.locator("#queue .queued-message")
    expect(queued).to_have_count(1)
    expect(queued).to_contain_text(t["queued"])
    expect(queued).to_contain_text("And Tamaris?")
    expect(box).to_have_value("")
    expect(page.locator("#composer select[name=level]")).to_have_value("maximal")
    _in_view(page, "#queue .queued-message")
    shot(f"turns-queued-{lang}-{width}")
    # A second one, removed before it is sent, is gone for good.
    box.press_sequentially("Forget this one")
    box.press("Enter")
    expect(queued).to_have_count(2)
    queued.last.get_by_role("button").click()
    expect(queued).to_have_count(1)
    # The queued text is no draft: neither a reload nor a reopened tab brings it back to be sent twice.
    page.reload()
    expect(page.locator("#queue .queued-message")).to_have_count(1)
    expect(page.locator("#queue .queued-message")).to_contain_text("And Tamaris?")
    expect(page.locator("#composer textarea[name=text]")).to_have_value("")
    # The first run ends; the queued message is sent as the next turn and leaves the queue.
    expect(page.locator("article.answer").first).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(page.locator(".turn .question .bubble").last).to_contain_text("And Tamaris?", timeout=15_000)
    expect(page.locator("#queue .queued-message")).to_have_count(0)
    reopened = page.context.new_page()
    reopened.goto(page.url)
    expect(reopened.locator("#composer textarea[name=text]")).to_have_value("")
    expect(reopened.locator(".turn")).to_have_count(2)  # "Forget this one" was never sent
    reopened.close()
    # Stop in the composer stops the run going on, then Send is back.
    expect(last_run(page)).to_have_attribute("data-status", "running")
    page.locator("#composer button.composer-stop").click()
    expect(last_run(page)).to_have_attribute("data-status", "stopped", timeout=15_000)
    expect(page.locator("#composer button.send")).to_be_visible()
    expect(page.locator("#composer button.send")).to_have_text(t["send"])
    expect(page.locator("#composer button.composer-stop")).to_be_hidden()
    if lang == "fr":
        _back(page)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_message_limit_counts_down_and_the_server_refuses_beyond(page: Page, lang: str) -> None:
    t = TEXTS[lang]
    _language(page, lang)
    box = page.locator("#composer textarea[name=text]")
    box.fill("x" * 31_000)
    counter = page.locator("#composer .counter")
    expect(counter).to_have_attribute("aria-live", "polite")
    expect(counter).to_contain_text(t["left"])
    box.fill("x" * 32_001)
    page.click("#composer button[type=submit]")
    expect(page.locator("#composer .error")).to_contain_text(t["limit"])
    assert box.evaluate("b => b.value.length") == 32_001  # the text is kept
    if lang == "fr":
        _back(page)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_copy_edit_regenerate_and_previous_versions(browser: Any, server: str, signed_in: Any, lang: str) -> None:
    t = TEXTS[lang]
    context = browser.new_context(base_url=server, storage_state=signed_in, viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/")
    _language(page, lang)
    ask(page, "Zorglub: what was paid?", kbs=("factures",), level="rapide")
    page.wait_for_url(re.compile(r"/c/\d+/$"))
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    turn = page.locator(".turn").last
    # Copy the answer: the clipboard holds it, the button says so.
    turn.locator(".answer-actions button.copy").click()
    expect(turn.locator(".answer-actions .copy-status")).to_have_text(t["copied"])
    answer = turn.locator("article.answer .text").inner_text()
    assert page.evaluate("navigator.clipboard.readText()") == answer
    turn.locator(".question-actions button.copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == "Zorglub: what was paid?"
    # A code block gets its own Copy button.
    page.evaluate(
        "() => { const d = document.createElement('div'); d.className = 'text';"
        " d.innerHTML = '<pre><code>print(42)</code></pre>';"
        " document.querySelector('#messages .turn:last-child article.answer').appendChild(d); }"
    )
    code_button = page.locator("#messages pre > button.copy-code")
    expect(code_button).to_have_text(t["copy_code"])
    code_button.click()
    assert page.evaluate("navigator.clipboard.readText()") == "print(42)"
    # Regenerate: a new answer with the same settings; the old one is a previous version.
    first_run = last_run(page).get_attribute("id")
    turn.locator("form.regenerate button").click()
    expect(page.locator(f"#{first_run}")).to_have_count(0)
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    versions = page.locator(".turn").last.locator("details.versions")
    expect(versions.locator("summary")).to_have_text(t["versions"])
    versions.locator("summary").click()
    expect(versions.locator(".version .text")).to_contain_text(answer[:30])
    # Edit the last message and resend it: its answer is replaced, both earlier versions stay reachable.
    edit = page.locator(".turn").last.locator("details.edit")
    edit.locator("summary").click()
    expect(edit.locator("summary")).to_have_text(t["edit"])
    edit.locator("textarea").fill("Zorglub: what was invoiced?")
    edit.locator("button[type=submit]").click()
    expect(page.locator(".turn .question .bubble").last).to_have_text("Zorglub: what was invoiced?")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    expect(page.locator(".turn")).to_have_count(1)
    expect(page.locator(".turn details.versions .version")).to_have_count(2)
    expect(page.locator(".turn .answer-actions form.regenerate button")).to_have_text(t["regenerate"])
    page.screenshot(path=f"artifacts/turns-versions-{lang}.png", full_page=True)
    context.close()
    assert not errors, errors


def test_copy_says_so_when_the_clipboard_is_refused(page: Page) -> None:
    ask(page, "Zorglub", kbs=("factures",), level="rapide")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined, configurable: true})")
    page.locator(".turn .answer-actions button.copy").last.click()
    expect(page.locator(".turn .answer-actions .copy-status").last).to_contain_text("select the text and press Ctrl+C")


def test_search_conversations_export_and_the_background_tab_title(page: Page, shot: Shot) -> None:
    # The tab is in the background while the run ends: its title says the answer is ready.
    page.add_init_script(
        "Object.defineProperty(document, 'visibilityState', {get: () => window.__hidden ? 'hidden' : 'visible'});"
    )
    ask(page, "Quokka invoices of Bimbamjob", kbs=("factures",), level="rapide")
    page.wait_for_url(re.compile(r"/c/\d+/$"))
    page.evaluate("window.__hidden = true")
    title = page.title()
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    _until(page, "document.title.startsWith('✓')")
    assert "Answer ready" in page.title() and title in page.title()
    page.evaluate("window.__hidden = false; document.dispatchEvent(new Event('visibilitychange'))")
    assert page.title() == title
    path = page.url.removeprefix(page.url.split("/c/")[0])
    # Search: live results as one types, over titles and messages.
    box = page.get_by_label("Search conversations")
    box.press_sequentially("quokk")
    results = page.locator("#search-results .search-results")
    expect(results.locator(f"a[href='{path}']")).to_have_count(1)
    expect(results.locator("mark").first).to_be_visible()
    shot("turns-search")
    box.fill("nothingmatchesthis")
    expect(page.locator("#search-results")).to_contain_text("No conversation matches")
    # Export, as Markdown and JSON downloads.
    md = page.request.get(f"{path}export.md")
    assert md.status == 200 and md.headers["content-disposition"].startswith("attachment")
    assert "Quokka invoices of Bimbamjob" in md.text()
    js = page.request.get(f"{path}export.json").json()
    assert js["turns"][0]["answer"] and js["turns"][0]["cost_eur"] > 0 and js["turns"][0]["sources"]


def test_a_source_opens_its_document_with_the_passages_read_marked(page: Page, shot: Shot) -> None:
    ask(page, "Bimbamjob: invoices", kbs=("factures",), level="approfondi")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=30_000)
    link = last_run(page).locator("footer .sources li a").first
    href = link.get_attribute("href") or ""
    assert re.match(r"^/documents/\d+/\?run=", href), href
    link.click()
    expect(page.locator(".document-text mark.read").first).to_be_visible()
    expect(page.locator("main")).to_contain_text("Invoices")
    shot("turns-document")
    download = page.locator("main a[download]")
    response = page.request.get(download.get_attribute("href") or "")
    assert response.status == 200 and response.headers["content-disposition"].startswith("attachment")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in response.headers["content-security-policy"]
    # The way back: the answer that opened it, in its conversation.
    conversation = page.locator("main a.back")
    expect(conversation).to_have_attribute("href", re.compile(r"^/c/\d+/#turn-[0-9a-f-]+$"))
    conversation.click()
    expect(page).to_have_url(re.compile(r"/c/\d+/#turn-"))
    expect(last_run(page)).to_be_visible()
