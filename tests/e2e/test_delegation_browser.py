"""A delegation over the organisation's cap, asked in the chat: the question with the estimate and its two buttons,
kept across a reload while the run waits, answered either way; at 1400 and 390 px, in English and in French.

The admin sets the cap through *Settings* (and takes it off at the end: the server is the session's)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import ask, last_run
from tests.live_server import ROOT

pytestmark = pytest.mark.slow

WORDS = {
    "en": {
        "question": "Bimbamjob: invoices, payments and relationship",
        "asks": "The assistant wants to launch 2 agents.",
        "cap": re.compile(r"more than 0\.0001 €, the most your organisation lets a delegation cost without asking"),
        "launch": "Launch the agents",
        "without": "Answer without them",
        "declined": "answered without it",
        "line": 'Delegated to an agent (demo-small): "',
        "estimate": re.compile(r"\d\.\d{4} €, at most \d\.\d{2,4} €"),
    },
    "fr": {
        "question": "Bimbamjob : factures, paiements et relation",
        "asks": "L’assistant veut lancer 2 agents.",
        "cap": re.compile(r"plus que 0,0001 €, le maximum qu’une délégation peut coûter sans demander"),
        "launch": "Lancer les agents",
        "without": "Répondre sans eux",
        "declined": "réponse sans elle",
        "line": "Délégation à un agent (demo-small) : «",
        "estimate": re.compile(r"\d,\d{4} €, au plus \d,\d{2,4} €"),
    },
}


def _set_cap(page: Page, value: str) -> None:
    page.goto("/settings/")
    field = page.locator("#levels-form input[name='parallel-delegation_confirm_eur']")
    field.fill(value)
    page.locator("#levels-form button[type=submit]").click()
    expect(page.get_by_text(re.compile("are saved|sont enregistrés"))).to_be_visible()
    page.goto("/")


@pytest.fixture
def capped(page: Page) -> Iterator[Page]:
    _set_cap(page, "0.0001")
    yield page
    _set_cap(page, "")


def _in(page: Page, language: str, width: int) -> dict[str, Any]:
    page.set_viewport_size({"width": width, "height": 900})
    if language == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("#composer button[type=submit]")).to_have_text("Envoyer")
    return WORDS[language]


@pytest.mark.parametrize("width", [1400, 390])
@pytest.mark.parametrize("language", ["en", "fr"])
def test_the_question_stays_across_a_reload_and_launching_launches(capped: Page, language: str, width: int) -> None:
    page = capped
    words = _in(page, language, width)
    ask(page, words["question"])
    run = last_run(page)
    prompt = run.locator(".delegation-prompt")
    expect(prompt).to_contain_text(words["asks"])
    expect(prompt).to_contain_text(words["cap"])
    expect(prompt.get_by_role("button", name=words["launch"])).to_be_visible()
    expect(run.locator(".delegation")).to_have_count(0)  # no agent runs while it waits
    # Both buttons fit the width, the question is not cut.
    for name in (words["launch"], words["without"]):
        box = prompt.get_by_role("button", name=name).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
    (ROOT / "artifacts").mkdir(exist_ok=True)
    page.screenshot(path=str(ROOT / "artifacts" / f"delegation-question-{language}-{width}.png"), full_page=True)

    page.reload()  # the question is still there, with its buttons, while the run waits
    run = last_run(page)
    prompt = run.locator(".delegation-prompt")
    expect(prompt).to_contain_text(words["asks"])
    prompt.get_by_role("button", name=words["launch"]).click()

    expect(run.locator(".delegation-prompt")).to_have_count(0)
    expect(run.locator(".delegation")).to_have_count(2)
    expect(run.locator(".delegation summary").first).to_contain_text(words["line"])
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    # Each agent's panel gives its estimate beside its cost.
    run.locator(".delegation summary").first.click()
    expect(run.locator(".delegation dd.estimate").first).to_have_text(words["estimate"])


@pytest.mark.parametrize("language", ["en", "fr"])
def test_answering_without_them_answers_without_agents(capped: Page, language: str) -> None:
    page = capped
    words = _in(page, language, 1400)
    ask(page, words["question"])
    run = last_run(page)
    run.locator(".delegation-prompt").get_by_role("button", name=words["without"]).click()
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(run.locator(".delegation-not-launched")).to_contain_text(words["declined"])
    expect(run.locator(".delegation")).to_have_count(0)
    expect(run.locator(".delegation-prompt")).to_have_count(0)
