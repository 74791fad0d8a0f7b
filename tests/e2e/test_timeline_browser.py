"""One timeline per run, the agent panel, and a dead run after a reconnect, in a real headless Chromium.

Under the Content-Security-Policy Playwright's ``wait_for_function`` cannot evaluate its strings: conditions
are polled with ``page.evaluate`` (``_until``).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import ask, last_run
from tests.live_server import DEMO_SERVER, ROOT, DemoSpeed, sign_in, start_server

pytestmark = pytest.mark.slow
Shot = Callable[[str], None]
SCREENSHOTS = ROOT / "docs" / "screenshots"

# The run's timeline in document order: each piece of text and each delegation line, with what it says.
TIMELINE = """run => Array.from(run.querySelectorAll('.timeline > .segment, .timeline > .work .delegation')).map(el =>
  el.classList.contains('delegation') ? ['line', el.querySelector('summary').textContent.trim().replace(/ \\((working|returned|en cours|revenu)[\\s\\S]*$/, '')]
                                      : ['text', el.textContent.trim()])"""

WORDS: dict[str, dict[str, str | re.Pattern[str]]] = {
    "en": {
        "question": "Bimbamjob: invoices, payments and relationship",
        "first": "I am handing the search of 2 knowledge bases to agents",
        "line": 'Delegated to an agent (demo-small): "Find in your knowledge base',
        "answer": "Here is what the documents say",
        "round": re.compile(r"round [1-5] of 5 · \d+\.\d{4} €"),
        "follow": "Follow this agent",
    },
    "fr": {
        "question": "Bimbamjob : factures, paiements et relation",  # the demo writes in the question's language
        "first": "Je confie la recherche dans 2 bases de connaissances à des agents",
        "line": "Délégation à un agent (demo-small) : « Cherche dans ta base de connaissances",
        "answer": "Voici ce que disent les documents",
        "round": re.compile(r"tour [1-5] sur 5 · \d+,\d{4} €"),
        "follow": "Suivre cet agent",
    },
}


def _until(page: Page, expression: str, arg: Any = None, timeout: float = 20) -> Any:
    for _ in range(int(timeout * 10)):
        value = page.evaluate(expression, arg)
        if value:
            return value
        page.wait_for_timeout(100)
    raise AssertionError(f"still false after {timeout} s: {expression}")


def _timeline(page: Page) -> list[list[str]]:
    handle = last_run(page).element_handle()
    entries: list[list[str]] = page.evaluate(TIMELINE, handle)
    return entries


def _check_order(entries: list[list[str]], words: dict[str, Any], answer: bool) -> None:
    """The first sentence, then the two delegation lines, then (once written) the answer: as they happened."""
    kinds = [kind for kind, _ in entries]
    assert kinds[:3] == ["text", "line", "line"], entries
    assert entries[0][1].startswith(words["first"]), entries
    assert all(text.startswith(words["line"]) for _, text in entries[1:3]), entries
    if answer:
        assert kinds == ["text", "line", "line", "text"], entries
        assert entries[3][1].startswith(words["answer"]), entries


def _save(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))


@pytest.mark.parametrize("language", ["en", "fr"])
def test_the_timeline_is_in_the_order_of_events_live_and_after_a_reload(page: Page, language: str) -> None:
    words = WORDS[language]
    if language == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("#composer button[type=submit]")).to_have_text("Envoyer")
    ask(page, str(words["question"]))
    run = last_run(page)
    # Live, while the agents work: the first sentence streamed first and is drawn first, the lines after it.
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    _until(page, "() => document.querySelectorAll('article.answer:last-of-type .timeline > .segment').length >= 1")
    _check_order(_timeline(page), words, answer=False)
    # Each line shows its round and its cost so far as it runs; the cost grows with the agent's rounds.
    progress = run.locator(".delegation[data-status=running] .progress").first
    expect(progress).to_contain_text(words["round"])
    _until(
        page,
        """() => Array.from(document.querySelectorAll('.delegation[data-status=running] .line-cost'))
                  .some(el => /[1-9]/.test(el.textContent))""",
    )
    if language == "en":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        run.screenshot(path=str(SCREENSHOTS / "timeline.png"))  # the run alone: its text, lines and answer so far
    # Reloaded mid-run: the same order, from the saved offsets, and it carries on live.
    page.reload()
    run = last_run(page)
    _check_order(_timeline(page), words, answer=False)
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    live = _timeline(page)
    _check_order(live, words, answer=True)
    expect(run.locator(".delegation .progress").first).to_contain_text(re.compile(r"\d[.,]\d{4} €"))
    page.reload()
    assert _timeline(page) == live  # drawn from the saved offsets, in the same order


@pytest.mark.parametrize("width", [1280, 390])
def test_the_agent_panel_follows_one_agent_live_and_closes_with_escape(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    ask(page, "Bimbamjob: invoices, payments and relationship")
    run = last_run(page)
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    link = run.locator(".delegation .follow-agent").first
    opener = link.get_attribute("id")
    link.click()
    panel = page.locator("#agent-panel")
    expect(panel).to_be_visible(timeout=15_000)  # fetched over the socket: a loaded machine takes longer
    title = panel.get_attribute("aria-labelledby")
    expect(page.locator(f"#{title}")).to_have_text("Agent (demo-small)")
    expect(panel.locator(".instruction")).to_contain_text("Find in your knowledge base")
    body = panel.locator(".agent-panel-body")
    expect(body).to_have_attribute("data-status", "running")
    # Live: each round and each action as it happens, then the report, without reloading anything.
    expect(body.locator(".round-title").first).to_contain_text("Round 1")
    expect(body.locator(".actions li[data-kind=search]").first).to_contain_text(
        re.compile(r"Searched “.+” in .+: \d+ result")
    )
    _save(page, "agent-panel.png" if width == 1280 else "agent-panel-phone.png")
    expect(body.locator(".actions li[data-kind=read]").first).to_contain_text("Read: ")
    expect(body).to_have_attribute("data-status", "ok", timeout=30_000)
    expect(body.locator(".round-title")).to_have_count(3)
    expect(body.locator(".report")).to_contain_text("[doc-")
    expect(body.locator("dd.cost")).to_contain_text(re.compile(r"\d\.\d{4} €"))
    box = panel.bounding_box()
    assert box is not None
    if width < 700:  # a drawer from the bottom, as wide as the screen
        assert box["x"] == 0 and box["width"] == width and box["y"] > 0
        assert abs(box["y"] + box["height"] - 900) < 2
    else:  # a side panel at the right
        assert box["x"] + box["width"] == width and box["y"] == 0 and box["width"] < width / 2
    page.keyboard.press("Escape")
    expect(panel).to_have_count(0)
    assert page.evaluate("document.activeElement.id") == opener  # back on the line it was opened from
    # Opened again after the run ended: the final state; the Close button closes it too. The link is first put
    # back as a push puts a line (new nodes htmx has not processed yet): the click still opens the panel in place.
    url = page.url
    page.evaluate("id => { const a = document.getElementById(id); a.outerHTML = a.outerHTML; }", opener)
    page.locator(f"#{opener}").click()
    expect(panel).to_be_visible()
    assert page.url == url
    expect(page.locator("#agent-panel .agent-panel-body")).to_have_attribute("data-status", "ok")
    page.locator("#agent-panel .agent-panel-close").click()
    expect(panel).to_have_count(0)
    # Another agent, or another run's: no such panel.
    href = page.locator(f"#{opener}").get_attribute("href")
    assert href is not None
    assert page.request.get(re.sub(r"/agents/[^/]+/$", "/agents/agent-99/", href)).status == 404
    # Opened in a new tab: a page of its own, styled, with the way back to its conversation.
    tab = page.context.new_page()
    tab.goto(href)
    expect(tab.locator("main h1")).to_have_text("Agent (demo-small)")
    expect(tab.locator(".agent-page .agent-panel-body")).to_have_attribute("data-status", "ok")
    assert tab.locator("header.top .brand").count() == 1
    tab.get_by_role("link", name="Back to the conversation").click()
    expect(tab.locator(f"#{opener}")).to_be_visible()
    tab.close()


def test_a_run_whose_server_died_shows_failed_after_the_page_reconnects(browser: Any, tmp_path: Path) -> None:
    """The server is killed mid-run, then started again on the same database (without ``recover_runs``): the page
    reconnects, asks for its run's state, and the run's lease says its process is gone."""
    env = {"DJANGO_DEBUG": "1", "MEDIA_ROOT": str(tmp_path / "media"), "RUNS_HEARTBEAT_SECONDS": "0.5"}
    slow: DemoSpeed = {"pace": "0.05", "latency": "1.5"}
    with start_server(DEMO_SERVER, tmp_path, env=env, **slow) as first:
        url = first.wait_until_up()
        context = browser.new_context(base_url=url, viewport={"width": 1280, "height": 800}, locale="en-GB")
        context.set_default_timeout(20_000)
        page = context.new_page()
        sign_in(page, url)
        ask(page, "Bimbamjob: invoices, payments and relationship")
        run = last_run(page)
        expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
        page.mouse.wheel(0, 2000)
        first.process.kill()  # no goodbye: the run's process is gone
        first.process.wait(timeout=10)
        port = first.port
    banner = page.locator("#connection")
    expect(banner).to_be_visible()
    # The server itself is down: the banner says so, and does not promise that the run goes on meanwhile.
    expect(banner).to_contain_text("The server cannot be reached; reconnecting as soon as it is back.")
    expect(banner).not_to_contain_text("goes on")
    box = banner.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800 and box["y"] > 800 / 2  # at the bottom, in sight
    # Stop posts over HTTP: with the server out of reach, the Stop form says the run was not stopped.
    run.locator("button.stop").click()
    expect(run.locator(".stop-error")).to_have_text(
        "The server cannot be reached: the run was not stopped. Try again in a moment."
    )
    shutil.copy(tmp_path / "server.log", tmp_path / "first-server.log")
    with start_server(DEMO_SERVER, tmp_path, env=env, port=port, **slow) as second:
        second.wait_until_up()
        expect(run).to_have_attribute("data-status", "error", timeout=40_000)
        expect(run.locator(".status.error")).to_contain_text("The process writing this answer stopped unexpectedly")
        expect(run.locator(".spinner")).to_have_count(0)
        expect(run.locator("button.stop")).to_have_count(0)
        expect(run.locator(".delegation[data-status=running]")).to_have_count(0)
        expect(banner).to_be_hidden()
        page.screenshot(path=str(tmp_path / "after-reconnect.png"))
        context.close()


SEEN = """([selector, bottom]) => Array.from(document.querySelectorAll(selector)).map(el => {
  const r = el.getBoundingClientRect(); return r.top >= 0 && r.bottom <= bottom; })"""


@pytest.mark.parametrize(("language", "width"), [("en", 1400), ("fr", 390)])
def test_four_working_agents_read_at_a_glance_and_fit_a_laptop_screen(page: Page, language: str, width: int) -> None:
    words = WORDS[language]
    page.set_viewport_size({"width": width, "height": 900 if width > 390 else 844})
    if language == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("html")).to_have_attribute("lang", "fr")
    # The demo's agents hang after their first round (#demo-hang): the lines stay working while they are looked at.
    ask(page, f"{words['question']} #demo-hang=30", kbs=("contrats", "factures", "comptes-rendus", "rapports"))
    run = last_run(page)
    lines = run.locator(".delegation[data-status=running]")
    expect(lines).to_have_count(4)
    _until(page, "() => document.querySelectorAll('.delegation[data-status=running] .actions.live li').length === 4")
    for line in lines.all():
        # One line: a status icon, the model, the instruction's short form, its round of the ceiling, its cost so far,
        # its panel's link and room for its own controls; under it, its latest action only.
        expect(line.locator("summary .status-icon .spinner")).to_have_count(1)
        expect(line.locator("summary .line")).to_contain_text(str(words["line"]).split(":")[0])
        short = line.locator("summary .instruction").inner_text()
        whole = line.locator(".instruction-full").text_content() or ""
        assert len(short) <= 81 and len(whole) > len(short) and whole.startswith(short.rstrip("…")), (short, whole)
        expect(line.locator("summary .progress")).to_contain_text(words["round"])
        expect(line.locator(".agent-side .follow-agent")).to_have_text(str(words["follow"]))
        expect(line.locator(".agent-side .agent-controls")).to_have_count(1)
        expect(line.locator(".actions.live li")).to_have_count(1)
    if width == 1400:
        # A long list of conversations (a user's months of them) scrolls in the sidebar: the page is not made taller.
        page.evaluate("""() => { const list = document.querySelector('.conversations');
          const item = list.querySelector('li') || Object.assign(document.createElement('li'), {textContent: 'A talk'});
          for (let i = 0; i < 80; i++) list.append(item.cloneNode(true)); }""")
        # ... its background the whole page's height still.
        heights = page.evaluate("['#sidebar', '#chat-layout'].map(s => document.querySelector(s).offsetHeight)")
        assert heights[0] == heights[1], heights
        # A laptop screen shows the run's first sentence, the four lines and the working line above the composer.
        # (a live push may still be laying the page out: looked at again until it has settled, 10 s at most)
        for _ in range(50):
            page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
            dock = page.locator(".dock").bounding_box()
            assert dock is not None
            seen = {
                selector: page.evaluate(SEEN, [f"article.answer:last-of-type {selector}", dock["y"]])
                for selector in (".timeline > .segment", ".delegation", ".working")
            }
            if all(v and all(v) for v in seen.values()):
                break
            page.wait_for_timeout(200)
        assert all(v and all(v) for v in seen.values()), seen
        for line in lines.all():  # the sentence on two lines at most
            height, leading = line.locator("summary .line").evaluate(
                "el => [el.getBoundingClientRect().height, parseFloat(getComputedStyle(el).lineHeight)]"
            )
            assert height <= 2 * leading + 1, (height, leading)
    page.screenshot(path=str(ROOT / "artifacts" / f"four-agents-{language}-{width}.png"))
    # Stopped, each line says so with its icon; expanded, a line shows its whole instruction.
    run.locator(".stop-form button.stop").click()
    expect(run).to_have_attribute("data-status", "stopped", timeout=15_000)
    first = run.locator(".delegation").first
    first.locator("summary").click()
    expect(first.locator(".instruction-full")).to_be_visible()
    icon = first.locator("summary .status-icon").evaluate("el => getComputedStyle(el, '::before').content")
    assert icon == '"■"', icon
    expect(first.locator("summary .progress")).to_contain_text(re.compile(r"\d (of|sur) 5 (rounds|tours)"))
    if language == "fr":
        page.click("header button[lang=en]")
        expect(page.locator("html")).to_have_attribute("lang", "en")
