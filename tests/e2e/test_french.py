"""In French, every outcome of an agent and the usage page say it in French: no English sentence of ours
and no raw code (``ok``, ``interrupted``, ``stopped``, ``error``, ``kb:``) in what the page shows.

"Ours" is every msgid of the project's and the apps' French catalogues whose French differs: the test reads
the .po files, so a sentence added later is checked too. The demo model's own words (its answer, the
agents' instructions and reports) are the model's, and are checked here for raw codes only; that they are
French (the question's language, else the interface's) is test_demo_language.py's. The demo's markers ``#demo-rounds=2`` and ``#demo-fail``
(demo/model/) make its agents end interrupted by their round budget and in error.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.test_browser import Shot, ask, last_run
from tests.live_server import ROOT

pytestmark = pytest.mark.slow

CATALOGUES = [
    ROOT / "locale" / "fr" / "LC_MESSAGES" / "django.po",
    *sorted(ROOT.glob("assistant/*/locale/fr/LC_MESSAGES/django.po")),
]
RAW_CODES = re.compile(r"\b(ok|interrupted|stopped|error)\b|kb:")
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%[sd]|\{\{[^}]*\}\}|%%|<[^>]+>")
# What the model wrote (English of the demo's, not of ours) and what the user wrote or uploaded (questions,
# titles, documents' titles), and the scripts it ran (run_code).
MODEL_TEXT = (
    ".text, .segment, .report, .instruction, .instruction-full, .question, h1.title, a[id^=conversation-link-], "
    ".sources li, .script pre"
)


def _entries(text: str) -> list[tuple[str, str]]:
    """(msgid, first msgstr) of a .po file's entries, plural forms' singular included."""
    out: list[tuple[str, str]] = []
    current: dict[str, str] = {}
    key = ""
    for line in [*text.splitlines(), ""]:
        line = line.strip()
        found = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr\[0\]|msgstr) "(.*)"$', line)
        if found:
            key = found.group(1)
            if key in ("msgctxt", "msgid") and "msgid" in current and "msgstr" in current:
                out.append((current["msgid"], current["msgstr"]))
                current = {}
            current[key.replace("[0]", "")] = found.group(2)
        elif line.startswith('"') and key:
            current[key.replace("[0]", "")] += line[1:-1]
        elif not line and "msgid" in current and "msgstr" in current:
            out.append((current["msgid"], current["msgstr"]))
            current, key = {}, ""
    return [(m.replace('\\"', '"'), s.replace('\\"', '"')) for m, s in out if m]


def english_of_ours() -> list[str]:
    """The pieces (between placeholders) of every msgid whose French differs, long enough to mean something."""
    pieces: set[str] = set()
    for catalogue in CATALOGUES:
        for msgid, msgstr in _entries(catalogue.read_text(encoding="utf-8")):
            if not msgstr or msgstr == msgid:
                continue
            for piece in PLACEHOLDER.split(msgid):
                piece = piece.strip(" .,:;()«»\"'“”")
                if len(piece) >= 4 and piece not in msgstr:
                    pieces.add(piece)
    return sorted(pieces)


ENGLISH = english_of_ours()


def shown_text(page: Page) -> tuple[str, str]:
    """What the page shows: ours (the model's words taken out) and the model's."""
    model = page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].map(e => e.innerText).join("\\n")""", MODEL_TEXT
    )
    ours = page.evaluate(
        """(selector) => {
            const body = document.body.cloneNode(true);
            body.querySelectorAll(selector).forEach(e => e.remove());
            document.documentElement.appendChild(body);
            const text = body.innerText;
            body.remove();
            return text;
        }""",
        MODEL_TEXT,
    )
    return ours, model


def assert_all_french(page: Page, where: str) -> None:
    ours, model = shown_text(page)
    english = [e for e in ENGLISH if re.search(rf"(?<!\w){re.escape(e)}(?!\w)", ours)]
    assert not english, f"{where}: English of ours on a French page: {english}"
    raw = sorted({m.group(0) for m in RAW_CODES.finditer(ours + "\n" + model)})
    assert not raw, f"{where}: raw codes on a French page: {raw}"


def open_agent(run: Locator) -> Locator:
    agent = run.locator(".delegation").first
    agent.locator("summary").click()
    return agent


def test_the_catalogues_give_english_to_look_for() -> None:
    # The check below means something only if it knows our sentences, those of this round's causes included.
    assert len(ENGLISH) > 200
    assert "round budget reached" in " ".join(ENGLISH) and "Status" in ENGLISH


def test_in_french_agents_interrupted_stopped_and_in_error_and_the_usage_page(page: Page, shot: Shot) -> None:
    page.click("header button[lang=fr]")
    expect(page.locator("#composer button[type=submit]")).to_have_text("Envoyer")

    # An agent interrupted by its round budget: two rounds, the second its forced landing.
    ask(page, "Bimbamjob factures #demo-rounds=2", kbs=("factures",))
    run = last_run(page)
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    agent = open_agent(run)
    expect(agent).to_have_attribute("data-status", "interrupted")
    expect(agent.locator("dd.status")).to_have_text("interrompu : budget de tours atteint (2/2 tours)")
    expect(agent.locator(".badge")).to_have_text("interrompu : budget de tours atteint (2/2 tours)")
    expect(agent.locator("dd").filter(has_text="Factures")).to_have_count(1)  # the base by its name, in French
    assert_all_french(page, "an agent interrupted by its round budget")
    shot("fr-1-interrupted-by-its-round-budget")

    # An agent in error: its model call fails (the demo's marker).
    ask(page, "Bimbamjob factures #demo-fail", kbs=("factures",))
    run = last_run(page)
    expect(run).to_have_attribute("data-status", "ok", timeout=30_000)
    agent = open_agent(run)
    expect(agent).to_have_attribute("data-status", "error")
    expect(agent.locator("dd.status")).to_have_text("erreur : le fournisseur du modèle est injoignable")
    expect(agent.locator(".report")).to_contain_text("Il n’a pas écrit de rapport")
    assert_all_french(page, "an agent in error")
    shot("fr-2-in-error")

    # Agents stopped by the user (Stop while they work).
    ask(page, "Bimbamjob : factures, paiements et relation", level="maximal")
    run = last_run(page)
    expect(run.locator(".delegation[data-status=running]")).to_have_count(2)
    run.locator("button.stop").click()
    expect(run).to_have_attribute("data-status", "stopped")
    stopped = run.locator(".delegation[data-status=stopped]")
    expect(stopped.first).to_be_visible()
    expect(stopped.first.locator(".badge")).to_have_text("arrêté à la demande")
    expect(run.locator(".status.stopped")).to_contain_text("Arrêté à la demande.")
    assert_all_french(page, "agents stopped by the user")
    shot("fr-3-stopped")

    # The whole conversation, reloaded: the same, from the saved steps.
    page.reload()
    expect(last_run(page)).to_have_attribute("data-status", "stopped")
    assert_all_french(page, "the conversation reloaded")

    # The usage page: the statuses of the main models and the agents counted in French.
    page.goto("/settings/usage/")
    statuses = page.locator("#agents-usage")
    expect(statuses).to_contain_text("interrompu 1")
    expect(statuses).to_contain_text("arrêté")
    expect(statuses).to_contain_text("terminé")
    assert_all_french(page, "the usage page")
    shot("fr-4-usage")
