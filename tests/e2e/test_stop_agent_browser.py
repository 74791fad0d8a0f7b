"""*Stop this agent*, in a real headless Chromium, at 1400 and 390 px, in English and French: the button on a working
agent's line and in its panel stops that agent alone; its line says so, its sibling and the run go on.

The demo's ``#demo-hang=4`` makes each agent's calls after its first round wait four seconds: the agents are still
working when the buttons are pressed.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import ask, last_run
from tests.live_server import ROOT

pytestmark = pytest.mark.slow

WORDS: dict[str, dict[str, str | re.Pattern[str]]] = {
    "en": {
        "question": "Bimbamjob: invoices, payments and relationship",
        "stop": "Stop this agent",
        "stopped": "this agent was stopped on request",
        "left": re.compile(r"\d+ rounds?, [\d,]+ tokens, \d+ s \(as round \d+ started\)"),
        "tokens": re.compile(r"[\d,]+ so far"),
    },
    "fr": {
        "question": "Bimbamjob : factures, paiements et relation",
        "stop": "Arrêter cet agent",
        "stopped": "cet agent a été arrêté à la demande",
        "left": re.compile(r"\d+ tours?, [\d\s\u202f\u00a0]+ jetons, \d+ s \(au début du tour \d+\)"),
        "tokens": re.compile(r"[\d\s\u202f\u00a0]+ jusqu’ici"),
    },
}


# Whether an element, scrolled into view, lies within the screen's width.
FITS = """([selector, width]) => { const el = document.querySelector(selector); if (!el) return false;
  el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect(); return r.left >= 0 && r.right <= width; }"""


@pytest.mark.parametrize("width", [1400, 390])
@pytest.mark.parametrize("language", ["en", "fr"])
def test_stop_this_agent_on_its_line_and_in_its_panel_stops_it_alone(page: Page, language: str, width: int) -> None:
    words = WORDS[language]
    page.set_viewport_size({"width": width, "height": 900 if width > 390 else 844})
    if language == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("html")).to_have_attribute("lang", "fr")
    ask(page, f"{words['question']} #demo-hang=4")
    run = last_run(page)
    lines = run.locator(".delegation")
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    first, second = lines.nth(0), lines.nth(1)

    # On the line: the button beside "Follow this agent", inside the screen. (Each push of the line's progress
    # replaces it: looked at in one go, by the line's id.)
    button = first.locator(".agent-controls button.stop-agent")
    expect(button).to_have_text(str(words["stop"]))
    selector = f"#{first.get_attribute('id')} .agent-controls button.stop-agent"
    assert page.evaluate(FITS, [selector, width])
    page.screenshot(path=str(ROOT / "artifacts" / f"stop-agent-{language}-{width}.png"))
    button.click()
    expect(first).to_have_attribute("data-status", "stopped", timeout=15_000)
    expect(first.locator("summary .badge")).to_have_text(str(words["stopped"]))
    expect(first.locator("button.stop-agent")).to_have_count(0)
    expect(second).to_have_attribute("data-status", "running")  # its sibling goes on
    expect(run).to_have_attribute("data-status", "running")

    # In the panel of the other one: its figures so far and its budget left, then the same button.
    second.locator(".follow-agent").click()
    panel = page.locator("#agent-panel .agent-panel-body")
    expect(panel).to_have_attribute("data-status", "running")
    expect(panel.locator("dd.tokens")).to_contain_text(words["tokens"])
    expect(panel.locator("dd.budget-left")).to_contain_text(words["left"])
    in_panel = panel.locator(".agent-controls button.stop-agent")
    expect(in_panel).to_have_text(str(words["stop"]))
    page.screenshot(path=str(ROOT / "artifacts" / f"stop-agent-panel-{language}-{width}.png"))
    in_panel.click()
    expect(panel).to_have_attribute("data-status", "stopped", timeout=15_000)
    expect(panel.locator("dd.status")).to_have_text(str(words["stopped"]))
    expect(panel.locator("button.stop-agent")).to_have_count(0)

    # The run goes on without them: the main model answers.
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(run.locator(".delegation[data-status=stopped]")).to_have_count(2)
    if language == "fr":
        page.click("header button[lang=en]")
        expect(page.locator("html")).to_have_attribute("lang", "en")
