"""The chat in a real headless Chromium against the running server, with the demo provider."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Locator, Page, expect

pytestmark = pytest.mark.slow
Shot = Callable[[str], None]

WORKING_EN = "An agent is working; waiting for its answer to continue"
WORKING_FR = "Un agent travaille, en attente de sa réponse pour continuer"


def choose(page: Page, resources: tuple[str, ...]) -> None:
    """Tick exactly these resources (``kb:factures``, ``web``, ``agents``…) in the composer's "+" menu, then close it."""
    menu = page.locator("#composer details.add-menu")
    if menu.get_attribute("open") is None:
        menu.locator("summary").click()
    for box in page.locator("#composer input[name=resources]:not([disabled])").all():
        box.set_checked(box.get_attribute("value") in resources)
    page.keyboard.press("Escape")
    expect(menu).not_to_have_attribute("open", "")


def ask(
    page: Page, text: str, kbs: tuple[str, ...] = ("factures", "comptes-rendus"), level: str = "approfondi"
) -> None:
    """Write a message with these knowledge bases and agents, and send it."""
    choose(page, (*(f"kb:{kb}" for kb in kbs), "agents"))
    page.select_option("#composer select[name=level]", level)
    page.fill("#composer textarea[name=text]", text)
    page.click("#composer button[type=submit]")


def last_run(page: Page) -> Locator:
    return page.locator("article.answer").last


def line_of(summary: str) -> str:
    """A delegation line without its state, which may move on between two looks."""
    return re.sub(r" \((working…|returned in .*)\).*$", "", summary.strip(), flags=re.S)


def answer_of(run: Locator) -> Locator:
    """The run's timeline: its text (the first sentences, the answer) with its delegation lines between."""
    return run.locator(".timeline")


def test_ask_with_two_knowledge_bases_and_agents_and_watch_it_live(page: Page, shot: Shot) -> None:
    shot("0-new-chat")
    ask(page, "Bimbamjob: invoices, payments and relationship")
    run = last_run(page)
    # Two delegation lines appear live, each with its instruction and model, while the agents work.
    lines = run.locator(".delegation")
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    expect(lines.first.locator("summary")).to_contain_text(
        'Delegated to an agent (demo-small): "Find in your knowledge base'
    )
    expect(lines.first.locator("summary")).to_contain_text("(working…)")
    expect(run.locator(".working")).to_have_text(WORKING_EN)
    expect(run.locator(".actions.live li").first).to_contain_text("Searched “")  # actions show as they happen
    shot("1-agents-working")
    # Both come back; the working line goes; the answer streams in.
    expect(run.locator(".delegation[data-status=ok]")).to_have_count(2)
    expect(run.locator(".working")).to_have_count(0)
    expect(lines.first.locator("summary")).to_contain_text("(returned in 3 rounds)")
    expect(answer_of(run)).to_contain_text("Here is what the documents say")
    growing = [len(answer_of(run).inner_text())]
    for _ in range(20):
        page.wait_for_timeout(100)
        growing.append(len(answer_of(run).inner_text()))
        if growing[-1] > growing[0] and run.get_attribute("data-status") == "running":
            break
    assert growing[-1] > growing[0], "the answer did not grow while streaming"
    shot("2-answer-streaming")
    expect(run).to_have_attribute("data-status", "ok")
    # Under the answer: sources, cost in EUR, tokens per model.
    footer = run.locator("footer.meta")
    expect(footer.locator(".sources li").first).to_contain_text("(doc-")
    expect(footer.locator(".cost")).to_contain_text(re.compile(r"Cost: \d+\.\d+ €"))
    expect(footer.locator(".tokens")).to_have_count(2)
    # Clicking a line expands its panel: model, rounds, duration, resources, actions, status, cost, report.
    panel = lines.first.locator("details")
    lines.first.locator("summary").click()
    expect(panel).to_have_attribute("open", "")
    expect(panel.locator("dd").first).to_have_text("Demo Small (offline demo)")
    expect(panel.locator(".actions li").first).to_contain_text(re.compile(r"Searched “.+” in .+: \d+ results?"))
    expect(panel.locator(".actions li").nth(1)).to_contain_text("Read: ")
    expect(panel.locator("dd.status")).to_have_text("ok")
    expect(panel.locator("dd.cost")).to_contain_text(re.compile(r"\d+\.\d+ €"))
    expect(panel.locator(".report")).to_contain_text("[doc-")
    shot("3-delegation-expanded")


def test_reload_mid_run_shows_the_same_state_and_continues_as_does_a_second_tab(page: Page, shot: Shot) -> None:
    ask(page, "Bimbamjob: invoices, payments and relationship")
    run = last_run(page)
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    expect(run.locator(".actions.live li").first).to_be_visible()
    seen = run.locator(".delegation summary").all_inner_texts()
    other = page.context.new_page()  # a second tab on the same conversation, opened mid-run
    other.goto(page.url)
    page.reload()
    run = last_run(page)
    # Everything so far, rendered from the saved steps: the same two lines, and the run still going.
    assert [line_of(t) for t in run.locator(".delegation summary").all_inner_texts()] == [line_of(t) for t in seen]
    assert run.get_attribute("data-status") == "running"
    assert run.locator(".actions li").count() >= 1
    shot("4-reloaded-mid-run")
    expect(run.locator(".delegation[data-status=ok]")).to_have_count(2)
    expect(answer_of(run)).to_contain_text("Here is what the documents say")
    for tab in (page, other):
        expect(last_run(tab)).to_have_attribute("data-status", "ok", timeout=20_000)
    live = answer_of(run).inner_text()
    assert answer_of(last_run(other)).inner_text() == live
    page.reload()
    assert answer_of(last_run(page)).inner_text() == live  # nothing was missed or repeated
    other.close()


def test_stop_keeps_the_partial_answer_and_marks_agents_stopped(page: Page, shot: Shot) -> None:
    ask(page, "Bimbamjob: invoices, payments and relationship", level="maximal")
    run = last_run(page)
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    run.locator("button.stop").click()
    expect(run).to_have_attribute("data-status", "stopped")
    # Each agent stops before its next turn; one whose last turn was already under way may come back
    # with its report (on a loaded machine the click can take that long). None is left running.
    stopped = run.locator(".delegation[data-status=stopped]")
    expect(stopped.first).to_be_visible()
    assert stopped.count() + run.locator(".delegation[data-status=ok]").count() == 2
    expect(stopped.first.locator(".badge")).to_have_text("stopped on request")
    expect(run.locator(".status.stopped")).to_contain_text(
        "Stopped on request. The partial answer and the agents' findings are kept."
    )
    expect(answer_of(run)).to_contain_text("I am handing the search of 2 knowledge bases to agents")
    expect(run.locator("button.stop")).to_have_count(0)
    expect(answer_of(run)).not_to_contain_text("Here is what the documents say")
    stopped.first.locator("summary").click()
    expect(stopped.first.locator("dd.status")).to_have_text("stopped on request")
    # Its report was the engine's record of what it had done (the main model read it): the page says so.
    expect(stopped.first.locator(".report")).to_contain_text("It wrote no report")
    shot("5-stopped")


def test_in_french_and_markup_from_a_document_or_a_model_shows_as_text(page: Page, shot: Shot) -> None:
    page.click("header button[lang=fr]")
    expect(page.locator("#composer button[type=submit]")).to_have_text("Envoyer")
    ask(page, "Zorglub", kbs=("factures",))
    run = last_run(page)
    line = run.locator(".delegation summary").first
    # A bare name: the demo cannot tell its language, so it writes in the interface's.
    expect(line).to_contain_text("Délégation à un agent (demo-small) : « Cherche dans ta base de connaissances ce que")
    expect(line).to_contain_text("(en cours…)")
    expect(run.locator(".working")).to_have_text(WORKING_FR)
    expect(line).to_contain_text("» (revenu en 3 tours)")
    expect(run).to_have_attribute("data-status", "ok", timeout=20_000)
    expect(run.locator("footer .cost")).to_contain_text("Coût : ")
    # The document's <script> and onerror image, quoted by the agent and by the main model: text only.
    text = answer_of(run)
    expect(text).to_contain_text('<script>window.__pwned = "script"</script>')
    expect(text).to_contain_text("<img src=x onerror=")
    line.click()
    expect(run.locator(".delegation .report").first).to_contain_text("<img src=x onerror=")
    assert run.locator("script, img").count() == 0
    assert page.evaluate("window.__pwned") is None
    shot("6-french-markup-shown-as-text")
    page.click("header button[lang=en]")
    expect(page.locator("#composer button[type=submit]")).to_have_text("Send")


def test_rename_in_place_then_delete_after_confirming(page: Page, shot: Shot) -> None:
    ask(page, "Zorglub: a conversation to rename", kbs=("factures",), level="rapide")
    expect(last_run(page)).to_have_attribute("data-status", "ok", timeout=20_000)
    path = page.url.removeprefix(page.url.split("/c/")[0])
    head = page.locator("#conversation-head")
    head.locator("summary").click()
    head.locator("input[name=title]").fill("  Renamed in place  ")
    head.locator("button[type=submit]").click()
    # htmx swaps the heading and the sidebar's link; the page is not reloaded.
    expect(page.locator("#conversation-head h1")).to_have_text("Renamed in place")
    expect(page.locator(f".sidebar a[href='{path}']")).to_have_text("Renamed in place")
    shot("7-renamed")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#conversation-head a.delete").click()
    page.wait_for_url(re.compile(r"/$"))
    expect(page.locator(f".sidebar a[href='{path}']")).to_have_count(0)
    response = page.goto(path)
    assert response is not None and response.status == 404


AGENTS_OFF = {
    "en": ("Agents are off at this level", "no model allowed here is at least 2 times cheaper"),
    "fr": ("Les agents sont désactivés à ce niveau", "aucun modèle autorisé ici n’est au moins 2 fois moins cher"),
}


TABLE_SEARCH = {
    "en": ("CSV export of the billing", "“Invoices 2024 (CSV export of the billing software)” (Invoices)"),
    "fr": ("export CSV du logiciel", "« Factures 2024 (export CSV du logiciel de facturation) » (Factures)"),
}
"""What a reader types in the composer's document search, and the one document found, as its label reads."""


@pytest.mark.parametrize(("lang", "width"), [("en", 1400), ("fr", 390)])
def test_agents_that_will_not_run_are_said_before_sending_and_an_overlong_message_is_refused_next_to_the_form(
    page: Page, shot: Shot, lang: str, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900 if width > 390 else 844})
    if lang == "fr":
        page.click("header button[lang=fr]")
        expect(page.locator("html")).to_have_attribute("lang", "fr")
    # One box pinned to the bottom of the window, a quarter of the screen at most when empty, growing with its text.
    height = page.viewport_size["height"] if page.viewport_size else 0
    dock = page.locator(".dock").bounding_box()
    assert dock is not None and abs(dock["y"] + dock["height"] - height) <= 1 and dock["height"] <= height / 4, dock
    text = page.locator("#composer textarea[name=text]")
    box = text.bounding_box()
    assert box is not None
    empty = box["height"]
    text.fill("A line\n" * 40)
    box = text.bounding_box()
    assert box is not None
    grown = box["height"]
    assert empty < grown <= height * 0.41, (empty, grown)
    text.fill("")
    # The "+" menu: Escape closes it and gives the focus back to its button.
    page.click("#composer details.add-menu summary")
    expect(page.locator("#composer .add-menu .menu")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#composer .add-menu .menu")).to_be_hidden()
    expect(page.locator("#composer details.add-menu > summary")).to_be_focused()
    level_note, model_note = page.locator("#composer .level-note"), page.locator("#composer .model-note")
    chip = page.locator("#composer .chip-agents")
    choose(page, ("kb:factures", "agents"))
    page.select_option("#composer select[name=model]", "demo-large")
    page.select_option("#composer select[name=level]", "approfondi")
    expect(level_note).to_be_hidden()
    expect(model_note).to_be_hidden()
    expect(chip.locator(".chip-icon")).to_be_hidden()
    # Below Approfondi (its agent round budget is 0), the agents chip is marked and the note says why.
    page.select_option("#composer select[name=level]", "rapide")
    expect(level_note).to_be_visible()
    expect(level_note).to_contain_text(AGENTS_OFF[lang][0])
    expect(chip.locator(".chip-icon")).to_be_visible()
    page.select_option("#composer select[name=level]", "approfondi")
    # No allowed model is at least twice cheaper than the small one: said too, instead of a silent tick.
    page.select_option("#composer select[name=model]", "demo-small")
    expect(model_note).to_be_visible()
    expect(model_note).to_contain_text(AGENTS_OFF[lang][1])
    expect(chip.locator(".chip-icon")).to_be_visible()
    shot(f"composer-agents-off-{lang}-{width}")
    # Unticked (its chip removes it), nothing is said.
    chip.click()
    expect(chip).to_be_hidden()
    expect(model_note).to_be_hidden()
    assert not page.locator("#composer input[value=agents]").is_checked()
    # Chosen documents: found by title in the "+" menu, ticked, shown as a chip, kept through another search.
    page.click("#composer details.add-menu summary")
    page.fill("#composer .find-documents", "Bimbamjob")
    found = page.locator("#composer .documents-found input[name=resources]")
    expect(found.first).to_be_visible()
    value = found.first.get_attribute("value") or ""
    assert value.startswith("doc:")
    found.first.check()
    chosen = page.locator(f"#composer .chosen-documents input[value='{value}']")
    expect(chosen).to_be_checked()
    page.fill("#composer .find-documents", "zzzz")
    expect(page.locator("#composer .documents-found .hint")).to_be_visible()
    expect(chosen).to_be_checked()
    # The demo's table document is found by the title its reader is shown, in their language.
    page.fill("#composer .find-documents", TABLE_SEARCH[lang][0])
    expect(page.locator("#composer .documents-found label")).to_have_text([TABLE_SEARCH[lang][1]])
    page.keyboard.press("Escape")
    doc_chip = page.locator(f"#composer .chip[data-value='{value}']")
    expect(doc_chip).to_be_visible()
    expect(doc_chip).to_have_attribute("aria-label", re.compile(r"^(Remove|Retirer) "))
    doc_chip.click()
    expect(doc_chip).to_be_hidden()
    expect(chosen).not_to_be_checked()
    if lang == "fr":
        page.click("header button[lang=en]")  # the next tests' language
        expect(page.locator("html")).to_have_attribute("lang", "en")
        return
    # Over MAX_REQUEST_BODY_MB (4 MB): refused above the form, which keeps the message.
    page.select_option("#composer select[name=level]", "approfondi")
    long_text = "word " * 900_000
    page.locator("#composer textarea[name=text]").evaluate("(box, text) => { box.value = text; }", long_text)
    page.click("#composer button[type=submit]")
    expect(page.locator("#composer .error")).to_contain_text("too long to send")
    assert page.locator("#composer textarea[name=text]").evaluate("box => box.value.length") == len(long_text)
    shot("composer-refusals")
