"""Uploading in a real headless Chromium: the documents list follows processing without a reload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import FilePayload, Page, expect

from tests.knowledge.knowledge_support import pdf_bomb
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
Shot = Callable[[str], None]


def test_an_upload_shows_ready_or_its_failure_without_reloading(page: Page, shot: Shot) -> None:
    page.goto("/kb/factures/")
    page.set_input_files(
        "form.upload input[name=files]",
        [
            FilePayload(name="quokka.txt", mimeType="text/plain", buffer=b"the quokka report"),
            FilePayload(name="bomb.pdf", mimeType="application/pdf", buffer=pdf_bomb()),
        ],
    )
    page.click("form.upload button[type=submit]")
    page.wait_for_url("**/kb/factures/")
    expect(page.locator(".messages")).to_be_visible()
    page.evaluate("window.__same_page = true")  # gone if the page were reloaded
    bomb = page.locator("#documents tr", has_text="bomb.pdf")
    expect(bomb).to_contain_text("Failed: too large when expanded: more than 50 MB of data.", timeout=30_000)
    expect(page.locator("#documents tr", has_text="quokka.txt")).to_contain_text("Ready")
    # Nothing processing any more: the list stops polling; it was updated in place.
    expect(page.locator("#documents[hx-trigger]")).to_have_count(0)
    assert page.evaluate("window.__same_page") is True
    shot("uploads-outcome")


VIEWPORTS = {"1400": {"width": 1400, "height": 900}, "390": {"width": 390, "height": 844}}
BATCH_WORDS = {
    "en": ("2 documents added", "Not added: virus.exe: this type of file is not supported"),
    "fr": ("2 documents ajoutés", "Non ajouté : virus.exe : ce type de fichier n’est pas pris en charge"),
}


def _tab(browser: Any, server: str, signed_in: dict[str, Any], width: str, language: str) -> Page:
    context = browser.new_context(base_url=server, storage_state=signed_in, viewport=VIEWPORTS[width])
    context.set_default_timeout(15_000)
    page: Page = context.new_page()
    page.goto("/")
    page.click(f"header button[lang={language}]")
    expect(page.locator("html")).to_have_attribute("lang", language)
    return page


@pytest.mark.parametrize(("width", "language"), [("1400", "en"), ("390", "fr")])
def test_a_batch_keeps_its_good_files_and_names_the_one_refused_and_why(
    browser: Any, server: str, signed_in: dict[str, Any], width: str, language: str
) -> None:
    page = _tab(browser, server, signed_in, width, language)
    page.goto("/kb/contrats/")
    names = (f"batch-{width}-a.txt", f"batch-{width}-b.txt")
    page.set_input_files(
        "form.upload input[name=files]",
        [
            FilePayload(name=names[0], mimeType="text/plain", buffer=b"the first memo"),
            FilePayload(name="virus.exe", mimeType="application/octet-stream", buffer=b"MZ\x90\x00"),
            FilePayload(name=names[1], mimeType="text/plain", buffer=b"the second memo"),
        ],
    )
    page.click("form.upload button[type=submit]")
    added, refused = BATCH_WORDS[language]
    expect(page.locator(".messages")).to_contain_text(added)
    expect(page.locator(".messages")).to_contain_text(refused)
    for name in names:
        expect(page.locator("#documents tr", has_text=name)).to_have_count(1)
    expect(page.locator("#documents tr", has_text="virus.exe")).to_have_count(0)
    page.context.close()


@pytest.mark.parametrize(("width", "language"), [("1400", "fr"), ("390", "en")])
def test_a_long_document_s_page_shows_its_next_part_as_the_reader_scrolls(
    browser: Any, server: str, signed_in: dict[str, Any], width: str, language: str
) -> None:
    """A text of three parts: the page holds the first; scrolling to its end brings the next, then the last, in
    place (no reload), until the whole text is there and nothing more is asked."""
    from assistant.chat.sources import PART_CHARS

    page = _tab(browser, server, signed_in, width, language)
    page.goto("/kb/contrats/")
    name = f"long-{width}.txt"
    text = "".join(f"line {i} of the long memo\n" for i in range(2 * PART_CHARS // 20 + 500))
    assert 2 * PART_CHARS < len(text) < 3 * PART_CHARS
    page.set_input_files(
        "form.upload input[name=files]", [FilePayload(name=name, mimeType="text/plain", buffer=text.encode())]
    )
    page.click("form.upload button[type=submit]")
    row = page.locator("#documents tr", has_text=name)
    expect(row).to_contain_text("Prêt" if language == "fr" else "Ready", timeout=30_000)
    pk = row.locator(".muted").first.inner_text().strip().removeprefix("doc-")
    page.goto(f"/documents/{pk}/")
    page.evaluate("window.__same_page = true")
    first = page.evaluate("document.querySelector('.document-text').textContent")
    assert len(first) < PART_CHARS + 100  # the first part, and the link to the rest
    for parts in (2, 3):  # scrolled to the end of what is there, the next part comes
        page.locator(".document-more").scroll_into_view_if_needed()

        def longer(parts: int = parts) -> bool:
            length: int = page.evaluate("document.querySelector('.document-text').textContent.length")
            return length > (parts - 1) * PART_CHARS + 1_000

        wait_until(longer, f"part {parts} of the text")
    expect(page.locator(".document-more")).to_have_count(0, timeout=30_000)
    whole = page.evaluate("document.querySelector('.document-text').textContent")
    assert whole.count(" of the long memo") == text.count(" of the long memo")  # every line, once
    assert whole.rstrip().endswith(text.rstrip().rsplit("\n", 1)[-1])
    assert page.evaluate("window.__same_page") is True
    page.context.close()
