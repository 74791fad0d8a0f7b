"""The offline demo speaks the question's language: a French question in the French interface gives a page with
no English sentence from the demo (nor of ours), an English one in English no French one; and the carbon figure
shows, marked as the demo's estimate, in the footer, the agent panel and the usage page.

"From the demo" is every sentence of its texts table (``demo/model/texts.py``, cut at its placeholders)
and every sentence of the demo documents of the other language (``load_demo``): the test reads them, so a
sentence added later is checked too. The page's text is what a user sees (``innerText``), delegations and the
agent panel opened.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from assistant.demo.management.commands.load_demo import BASES, FRENCH_DOCUMENTS
from assistant.demo.model import TEXTS, Language
from tests.e2e.test_browser import Shot, ask, last_run
from tests.e2e.test_french import assert_all_french

pytestmark = pytest.mark.slow

QUESTIONS: dict[Language, str] = {
    "fr": "Quels sont les retards de paiement de Bimbamjob et que disent les comptes rendus de la relation ?",
    "en": "What are the late payments of Bimbamjob and what do the meeting reports say about the relationship?",
}
OTHER: dict[Language, Language] = {"fr": "en", "en": "fr"}
FIELD = re.compile(r"\{\w+\}")


def demo_sentences(language: Language) -> list[str]:
    """The demo's pieces of text in ``language`` that its other language does not share, long enough to mean
    something: what must not show on a page in the other language."""
    pieces: set[str] = set()
    for texts in TEXTS.values():
        for piece in FIELD.split(texts[language]):
            piece = piece.strip(" .,:;()«»*_'’\n")
            if len(piece) >= 8 and piece not in texts[OTHER[language]]:
                pieces.add(piece)
    documents = [d for _, _, docs in BASES.values() for d in docs] if language == "en" else []
    documents += [d for docs in FRENCH_DOCUMENTS.values() for d in docs] if language == "fr" else []
    for _, text in documents:
        pieces.update(s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) >= 12)
    return sorted(pieces)


def visible_text(page: Page) -> str:
    text: str = page.evaluate("() => document.body.innerText")
    return text


def open_everything(page: Page) -> None:
    """Every delegation's details open, then the first agent's panel."""
    for summary in last_run(page).locator(".delegation > summary").all():
        summary.click()
    last_run(page).locator(".delegation .follow-agent").first.click()
    expect(page.locator("#agent-panel .agent-panel-body")).to_have_attribute("data-status", "ok")


def test_the_demo_s_texts_give_sentences_to_look_for() -> None:
    # The check below means something only if it knows the demo's sentences and documents in each language.
    for language in ("fr", "en"):
        sentences = demo_sentences(language)
        assert len(sentences) > 60, language
    assert "Voici ce que disent les documents sur" in demo_sentences("fr")
    assert "I am handing the search of" in demo_sentences("en")


@pytest.mark.parametrize("language", ["fr", "en"])
def test_a_question_in_the_interface_s_language_gives_a_page_in_that_language_only(
    page: Page, shot: Shot, language: Language
) -> None:
    if language == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("#composer button[type=submit]")).to_have_text("Envoyer")
    ask(page, QUESTIONS[language])
    run = last_run(page)
    expect(run).to_have_attribute("data-status", "ok", timeout=60_000)
    open_everything(page)
    shown = visible_text(page)
    # The demo wrote in the question's language: its handing over, instructions, reports, answer and footer.
    own = {
        "fr": ("Je confie la recherche", "Cherche dans ta base de connaissances", "Voici ce que disent les documents"),
        "en": ("I am handing the search", "Find in your knowledge base", "Here is what the documents say"),
    }[language]
    for sentence in own:
        assert sentence in shown, sentence
    # The instructions name no base by its code: each agent's line names its base.
    instructions = " ".join(run.locator(".instruction").all_inner_texts())
    assert "comptes-rendus" not in instructions and "kb:" not in instructions, instructions
    bases = {"fr": ("Factures", "Comptes rendus de réunion"), "en": ("Invoices", "Meeting reports")}[language]
    for base in bases:
        assert base in shown, base
    # The invoices agent's query totals, in its report and the answer: in the reader's number format (the tool's
    # result, the model's data, holds 39350).
    total = {"fr": "39\u00a0350", "en": "39,350"}[language]
    expect(run.locator(".text table tr").filter(has_text="Bimbamjob").first).to_contain_text(total)
    assert "39350" not in shown
    footer = TEXTS["footer"][language].strip("_")
    assert footer in shown
    other = [s for s in demo_sentences(OTHER[language]) if s in shown]
    assert not other, f"{OTHER[language]} from the demo on a {language} page: {other}"
    if language == "fr":
        assert_all_french(page, "a French question in the French interface")  # nor English of ours, nor raw codes
        # The reports' headings too (the engine writes them in English for the main model; the page words them).
        assert "Lacunes : " in shown and "Gaps:" not in shown and "Sources:" not in shown
    # Carbon: a figure, marked as the demo's estimate, under the answer and in the agent panel.
    mark = {"fr": "estimation de la démo hors ligne", "en": "the offline demo’s estimate"}[language]
    expect(run.locator("span.carbon")).to_contain_text(re.compile(r"\d g CO₂e|\d\.\d+ g CO₂e"))
    expect(run.locator("span.carbon")).to_contain_text(mark)
    expect(page.locator("#agent-panel dd.carbon")).to_contain_text(mark)
    shot(f"demo-language-{language}")

    page.goto("/settings/usage/")
    usage = page.locator("#models-usage")
    expect(usage.locator("td").filter(has_text="g CO₂e").first).to_contain_text(
        {"fr": "(estimation de la démo)", "en": "(the demo’s estimate)"}[language]
    )
    expect(usage.locator(".demo-carbon")).to_contain_text("Mistral Large 3 ")
    if language == "fr":
        assert_all_french(page, "the usage page")
    shot(f"demo-language-{language}-usage")
