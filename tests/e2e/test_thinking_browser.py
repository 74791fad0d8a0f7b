"""The main model's reasoning summary in a real headless Chromium: a folded "Thinking" («Réflexion») in the timeline,
round by round before that round's text, that opens on a click and stays open as the run goes on and after a
reload; at 1400 and 390 px, in English and in French (the offline demo-large reasons)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from assistant.demo.model import say
from assistant.demo.model.texts import Language
from tests.e2e.test_browser import ask, last_run

pytestmark = pytest.mark.slow

WORDS = {
    "en": {"question": "Bimbamjob: invoices, payments and relationship", "label": "Thinking"},
    "fr": {"question": "Bimbamjob : factures, paiements et relation", "label": "Réflexion"},
}
# The timeline's entries in document order: each piece of text, and each folded summary with its label.
SELECTOR = ".timeline > .segment, .timeline > .work details.thinking, .timeline > .work .delegation"
ORDER = f"""run => Array.from(run.querySelectorAll('{SELECTOR}')).map(el => el.matches('details.thinking') ? 'thinking'
  : el.classList.contains('delegation') ? 'line' : 'text')"""


@pytest.mark.parametrize("width", [1400, 390])
@pytest.mark.parametrize("language", ["en", "fr"])
def test_the_main_models_summary_is_folded_in_its_place_and_opens(
    page: Page, shot: Callable[[str], None], language: Language, width: int
) -> None:
    words = WORDS[language]
    page.set_viewport_size({"width": width, "height": 900})
    if language == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("#composer button[type=submit]")).to_have_text("Envoyer")
    ask(page, words["question"])
    run = last_run(page)
    thinking = run.locator(".timeline > .work details.thinking")
    # Live: the first round's summary, folded, before the first sentence and the delegation lines.
    expect(thinking.first).to_be_visible()
    expect(thinking.first.locator("summary")).to_have_text(words["label"])
    expect(thinking.first.locator(".thinking-text")).to_be_hidden()
    thinking.first.locator("summary").click()
    expect(thinking.first.locator(".thinking-text")).to_have_text(say("thinking_agents", language))
    # It stays open while the run goes on (the lines, the answer and the next round's summary come in).
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(thinking.first).to_have_attribute("open", "")
    order = page.evaluate(ORDER, run.element_handle())
    assert order[:2] == ["thinking", "text"] and order.count("thinking") == 2, order
    assert order.index("line") < order.index("thinking", 1) < len(order) - 1, order  # round 2's, before the answer
    box = thinking.first.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width  # no sideways scroll, phone included
    shot(f"thinking-{language}-{width}")
    # A reload draws the same, folded again.
    page.reload()
    run = last_run(page)
    assert page.evaluate(ORDER, run.element_handle()) == order
    expect(run.locator(".timeline > .work details.thinking").last.locator("summary")).to_have_text(words["label"])
