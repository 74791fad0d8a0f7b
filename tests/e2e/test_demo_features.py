"""Every feature of the offline demo in the browser, asked as a user would in English and in French (README, "Try
it"): run_code totals the invoices per client, the whole annual report read in parts (from_char), a forced
landing at Approfondi's round budget followed by a relaunch with a more precise instruction (a second agents
call), the Vérificateur profile chosen for a check, and the demo web searched then read.

A server of its own: ``load_demo``'s data, ``RUN_CODE_ENABLED=1`` and ``DEMO_WEB=1`` (what ``make run`` turns on).
``run_code`` is offered only where every layer of its sandbox can run (``.ci/run`` installs bubblewrap and
libseccomp), exactly as in the product: this server changes nothing of the sandbox.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from assistant.demo.management.commands.load_demo import TABLE_TITLE, TABLE_WORDS
from assistant.demo.model.feature_texts import FEATURE_TEXTS
from assistant.demo.model.texts import Language
from assistant.engine.sandbox_probe import detect
from tests.e2e.test_browser import choose
from tests.e2e.test_french import assert_all_french
from tests.live_server import DEMO_SERVER, sign_in, start_server

pytestmark = pytest.mark.slow

QUESTIONS = {
    "code": {"en": "Totals per client of the invoices", "fr": "Total des factures par client"},
    "whole": {"en": "Read the whole annual report", "fr": "Lis tout le rapport annuel"},
    "check": {
        "en": "Check whether Bimbamjob paid invoice F-2024-077",
        "fr": "Vérifie si Bimbamjob a payé la facture F-2024-077",
    },
    "web": {
        "en": "What does the web say about route optimisation?",
        "fr": "Que dit le web sur l’optimisation des tournées ?",
    },
}
LANGUAGES = ["en", "fr"]
PLACEHOLDER = re.compile(r"\{\w+\}")


@pytest.fixture(scope="module")
def features_server(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("e2e-features")
    env = {"DJANGO_DEBUG": "1", "RUN_CODE_ENABLED": "1", "DEMO_WEB": "1"}
    with start_server(DEMO_SERVER, folder, pace="0.005", latency="0.2", env=env) as server:
        yield server.wait_until_up()


@pytest.fixture(scope="module")
def features_signed_in(browser: Any, features_server: str) -> dict[str, Any]:
    context = browser.new_context(base_url=features_server)
    page = context.new_page()
    sign_in(page, features_server)
    state: dict[str, Any] = context.storage_state()
    context.close()
    return state


@pytest.fixture(params=LANGUAGES)
def lang(request: pytest.FixtureRequest) -> str:
    """The language of the test: the interface's and the question's."""
    language: str = request.param
    return language


@pytest.fixture
def fpage(lang: str, browser: Any, features_server: str, features_signed_in: Any) -> Iterator[Page]:
    """A signed-in tab on a new chat, in the interface language ``lang``: English on a laptop (1400 px), French on a
    phone (390 px), so that each feature (the run_code step's script among them) is seen at both widths."""
    language = lang
    context = browser.new_context(
        base_url=features_server,
        storage_state=features_signed_in,
        viewport={"width": 390, "height": 844} if language == "fr" else {"width": 1400, "height": 900},
        locale="fr-FR" if language == "fr" else "en-GB",
    )
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/")
    page.click(f"header button[lang={language}]")
    expect(page.locator("#composer button[type=submit]")).to_have_text("Envoyer" if language == "fr" else "Send")
    yield page
    context.close()
    assert not errors, errors


def ask(page: Page, text: str, resources: tuple[str, ...], level: str) -> Locator:
    """Send ``text`` with exactly these resources at this level; the run, once it has ended."""
    choose(page, resources)
    page.select_option("#composer select[name=level]", level)
    page.fill("#composer textarea[name=text]", text)
    page.click("#composer button[type=submit]")
    run = page.locator("article.answer").last
    expect(run).to_have_attribute("data-status", "ok", timeout=60_000)
    return run


def said(code: str, language: Language) -> list[str]:
    """The fixed pieces of one of the features' sentences (between its placeholders), long enough to look for."""
    pieces = PLACEHOLDER.split(FEATURE_TEXTS[code][language])
    return [p.strip(" _*.:,;()") for p in pieces if len(p.strip(" _*.:,;()")) >= 12]


def no_english_of_the_features(page: Page) -> None:
    """In French, none of the features' English sentences shows (what they write, their instructions included)."""
    text = page.locator("main").inner_text()
    english = [p for code in FEATURE_TEXTS for p in said(code, "en") if p in text and p not in said(code, "fr")]
    assert not english, english


def check_language(page: Page, lang: str, where: str) -> None:
    if lang == "fr":
        assert_all_french(page, where)
        no_english_of_the_features(page)


def test_run_code_totals_the_invoices_per_client(fpage: Page, lang: Language) -> None:
    if detect() is None:
        pytest.skip("run_code needs Linux and a Python to start a child")
    run = ask(fpage, QUESTIONS["code"][lang], ("kb:factures", "code"), "standard")

    comment = FEATURE_TEXTS["code_comment"][lang]
    action = "Code : " if lang == "fr" else "Code: "
    # The step says the script's first line, and unfolds the whole script, highlighted.
    step = run.locator("details.main-action.script")
    expect(step.locator("summary")).to_have_text(action + comment)
    expect(step.locator("pre")).to_be_hidden()
    step.locator("summary").click()
    expect(step.locator("pre")).to_contain_text("index = json.load(f)")  # beyond its first line
    assert step.locator("pre span[class]").count() > 5  # Pygments' tokens
    # 18,400 + 4,900 + 6,250 + 4,900 + 4,900: the five invoices of Bimbamjob in the table.
    total = "39\u00a0350,00" if lang == "fr" else "39,350.00"
    expect(run.locator(".text table")).to_contain_text("Bimbamjob")
    expect(run.locator(".text table tr").filter(has_text="Bimbamjob")).to_contain_text(total)
    # The table by its document's title, in the reader's language: its source, and the answer that quotes it.
    expect(run.locator(".sources li")).to_contain_text(["Factures 2024" if lang == "fr" else "Invoices 2024"])
    titles = {"fr": TABLE_TITLE, "en": TABLE_WORDS["en"]["title"]}
    expect(run.locator(".text").last).to_contain_text(titles[lang])
    assert titles["en" if lang == "fr" else "fr"] not in run.locator(".text").last.inner_text()
    check_language(fpage, lang, "run_code's totals")


def test_the_whole_annual_report_is_read_in_parts(fpage: Page, lang: str) -> None:
    run = ask(fpage, QUESTIONS["whole"][lang], ("kb:rapports",), "approfondi")

    reads = run.locator(".main-action").filter(has_text="Lu : " if lang == "fr" else "Read: ")
    expect(reads).to_have_count(4)  # about 20,000 characters: four parts of kb_read, from_char after the first
    expect(run.locator(".text")).to_contain_text("en entier, en 4 parties" if lang == "fr" else "in full, in 4 parts")
    expect(run.locator(".text")).to_contain_text(
        "Conclusions et recommandations" if lang == "fr" else "Conclusions and recommendations"
    )
    check_language(fpage, lang, "the whole report")


def test_an_agent_lands_forced_at_approfondi_and_is_relaunched_on_the_rest(fpage: Page, lang: str) -> None:
    run = ask(fpage, QUESTIONS["whole"][lang], ("kb:rapports", "agents"), "approfondi")

    lines = run.locator(".delegation")
    expect(lines).to_have_count(2)  # two agents calls: the second with a more precise instruction
    first, second = lines.nth(0), lines.nth(1)
    expect(first).to_have_attribute("data-status", "interrupted")
    expect(first.locator("summary")).to_contain_text("5")
    first.locator("summary").click()
    landing = "atterrissage forcé" if lang == "fr" else "forced landing"
    expect(first.locator("dd").filter(has_text=landing)).to_have_count(1)
    expect(second).to_have_attribute("data-status", "ok")
    expect(second.locator(".instruction-full")).to_contain_text("from_char=18000")
    relaunch = (
        "relancé avec une consigne plus précise" if lang == "fr" else "relaunched with a more precise instruction"
    )
    expect(run.locator(".text")).to_contain_text(relaunch)
    # The panel follows the relaunched agent: one document, read from character 18,000.
    second.locator(".follow-agent").click()
    panel = fpage.locator("#agent-panel-slot")
    expect(panel.locator(".rounds .round").first).to_contain_text("Lu : " if lang == "fr" else "Read: ")
    check_language(fpage, lang, "a forced landing and a relaunch")


def test_a_check_goes_to_the_verificateur_profile(fpage: Page, lang: str) -> None:
    run = ask(fpage, QUESTIONS["check"][lang], ("kb:factures", "agents"), "approfondi")

    [line] = run.locator(".delegation").all()
    line.locator("summary").click()
    expect(line.locator("dd.profile")).to_have_text("Vérificateur" if lang == "fr" else "Checker")  # its words
    expect(line.locator("dt").filter(has_text="Profil d’agent" if lang == "fr" else "Agent profile")).to_have_count(1)
    expect(line.locator(".report")).to_contain_text("F-2024-077")
    expect(run.locator(".text")).to_contain_text("profil de vérification" if lang == "fr" else "the checking profile")
    check_language(fpage, lang, "a check by a profile")


def test_the_demo_web_is_searched_then_read(fpage: Page, lang: str) -> None:
    run = ask(fpage, QUESTIONS["web"][lang], ("web",), "standard")

    actions = run.locator(".main-action")
    expect(actions).to_have_count(2)  # web_search, then web_fetch of the page in the question's language
    page_path = "/fr/actualites/" if lang == "fr" else "/en/news/"
    expect(actions.nth(1)).to_contain_text("orchidee-logistique.demo.example" + page_path)
    expect(run.locator(".text")).to_contain_text("orchidee-logistique.demo.example" + page_path)
    expect(run.locator(".sources li").filter(has_text="orchidee-logistique.demo.example")).to_have_count(1)
    check_language(fpage, lang, "the demo web")
