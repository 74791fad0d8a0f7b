"""The demo model's feature behaviours (demo/model/features.py), each triggered by a natural question in
French and in English: run_code over a table, the web, an agent profile, a long document read in parts with
from_char, a forced landing at the level's round budget, and an agent relaunched after an interrupted one.

Two levels: the procedure's first response to the main model's real first request (``loop.first_request``),
for each trigger and language; and whole runs through ``run_chat`` with the real tools (kb_search/kb_read over
MemoryKnowledge, run_code in the sandbox, web_search/web_fetch against a local server).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from assistant.demo.model import DEMO_MODELS, DemoModel, Language, procedure, say, triggers
from assistant.demo.model.texts import agent_words
from assistant.demo.web import demo_web_tools
from assistant.engine.catalogue import Catalogue
from assistant.engine.events import AgentFinished, AgentStarted, ToolCallEvent, ToolResultEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import first_request
from assistant.engine.policy import AgentProfile, Level, Policy, RunRequest, plan_request
from assistant.engine.run_code import code_tools
from assistant.engine.sandbox import LAYERS, CodeLimits, Sandbox
from assistant.engine.sandbox_probe import detect
from assistant.engine.tools import MAX_CHARS_PER_DOCUMENT, Document, ToolFactory
from assistant.engine.types import Message, ModelResponse
from assistant.engine.web import WebConfig, web_tools
from tests.engine.engine_support import Harness, harness

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "assistant" / "demo" / "data"
REPORTS = {"en": "annual-report-2024.en.txt", "fr": "rapport-annuel-2024.fr.txt"}
CHECKER = "Vérificateur"

# As a base holds a table document's text (knowledge/processing.py): a line naming it, then its rows.
TABLE = """Table factures: 5 rows; columns: client (VARCHAR), facture (VARCHAR), date (DATE), montant (DOUBLE), \
statut (VARCHAR).
client | facture | date | montant | statut
Tamaris Conseil | F-2024-005 | 2024-01-08 | 4200.0 | payée
Bimbamjob | F-2024-031 | 2024-02-05 | 18400.0 | payée
Bimbamjob | F-2024-077 | 2024-06-03 | 6250.0 | impayée
Tamaris Conseil | F-2024-090 | 2024-07-15 | 12000.0 | payée
Orchidée Logistique | F-2024-133 | 2024-11-04 | 15000.0 | payée"""


def number(n: int, language: str) -> str:
    return f"{n:,}".replace(",", "\u00a0" if language == "fr" else ",")


def report(language: str) -> Document:
    text = (DATA / REPORTS[language]).read_text(encoding="utf-8").strip()
    return Document(f"doc-{language}", "rapports", text.splitlines()[0], text)


TABLE_TITLES = {"fr": "Factures 2024 (export CSV)", "en": "Invoices 2024 (CSV export)"}
"""The table's title as written (French) and in English: a script's answer quotes the one of its language."""


def knowledge() -> MemoryKnowledge:
    return MemoryKnowledge(
        {
            "rapports": [report("en"), report("fr")],
            "factures": [
                Document(
                    "doc-77",
                    "factures",
                    "Invoice F-2024-077 — Bimbamjob",
                    "Invoice F-2024-077 issued to Bimbamjob on 2024-06-03 for 6,250 EUR. Due 2024-07-03. "
                    "Unpaid at 2024-12-31; a formal notice was sent on 2024-10-15.",
                ),
                Document(
                    "doc-78",
                    "factures",
                    "Facture F-2024-077 — Bimbamjob",
                    "Facture F-2024-077 émise à Bimbamjob le 3 juin 2024 pour 6 250 EUR. Impayée au 31 décembre 2024 ; "
                    "une mise en demeure a été envoyée le 15 octobre 2024.",
                ),
                Document("doc-table", "factures", TABLE_TITLES["fr"], TABLE, titles={"en": TABLE_TITLES["en"]}),
            ],
        }
    )


POLICY = Policy(
    profiles={
        CHECKER: AgentProfile(
            name=CHECKER,
            instructions="Check a claim against the documents of your scope only.",
            default_model="demo-small",
            tools=frozenset({"kb"}),
        )
    }
)


def sandbox() -> Sandbox:
    """The sandbox as this machine gives it; without bubblewrap, the other layers (seccomp, the run's own user,
    limits, Landlock, the audit hook) still hold, and the script is the same."""
    isolation = detect()
    if isolation is None:
        pytest.skip("run_code needs Linux and a Python to start a child")
    layers = LAYERS if isolation.complete else LAYERS - {"namespaces"}
    return Sandbox(CodeLimits(cpu_seconds=5, wall_seconds=20, memory_mb=256), isolation, layers=layers)


def demo(factories: list[ToolFactory] | None = None, policy: Policy = POLICY) -> Harness:
    backend = knowledge()
    return harness(
        {m.id: DemoModel(m) for m in DEMO_MODELS},
        catalogue=Catalogue(DEMO_MODELS),
        knowledge_backend=backend,
        policy=policy,
        factories=factories or [],
    )


def first_response(
    h: Harness, question: str, resources: tuple[str, ...], language: Language, level: Level = "approfondi"
) -> ModelResponse:
    """The demo's answer to the main model's real first request for this question."""
    request = RunRequest(messages=(Message.user(question),), model="demo-large", level=level, resources=resources)
    step = procedure.Step(
        first_request(request, plan_request(request, h.ctx.catalogue, h.ctx.policy), h.ctx),
        language,
        lambda n: f"call_{n}",
    )
    return procedure.respond(step)


def arguments(response: ModelResponse, name: str) -> dict[str, Any]:
    [call] = [c for c in response.tool_calls if c.name == name]
    parsed: dict[str, Any] = call.parsed_arguments()
    return parsed


QUESTIONS: dict[triggers.Trigger, dict[str, str]] = {
    "code": {"en": "Totals per client of the invoices", "fr": "Total des factures par client"},
    "web": {
        "en": "What does the web say about route optimisation?",
        "fr": "Que dit le web sur l’optimisation des tournées ?",
    },
    "check": {
        "en": "Check whether Bimbamjob paid invoice F-2024-077",
        "fr": "Vérifie si Bimbamjob a payé la facture F-2024-077",
    },
    "whole": {"en": "Read the whole annual report", "fr": "Lis tout le rapport annuel"},
}
LANGS: list[Language] = ["en", "fr"]
RUN_LANGS: list[Language] = ["en", "fr"]


# Triggers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", LANGS)
@pytest.mark.parametrize("trigger", sorted(QUESTIONS))
def test_each_question_asks_its_own_feature_only(trigger: triggers.Trigger, language: str) -> None:
    question = QUESTIONS[trigger][language]
    assert triggers.asks(question, trigger)
    others = [t for t in QUESTIONS if t != trigger and triggers.asks(question, t)]
    assert others == []


@pytest.mark.parametrize(
    "question",
    [
        "Bimbamjob: invoices, payments and relationship",
        "Fiche complète sur Bimbamjob : facturation 2024, suivi, risque",
        "Que disent les comptes rendus de réunion sur Tamaris Conseil ?",
    ],
)
def test_an_ordinary_question_triggers_nothing(question: str) -> None:
    assert [t for t in QUESTIONS if triggers.asks(question, t)] == []


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("Read the whole annual report", ["annual", "report"]),
        ("Lis tout le rapport annuel", ["rapport", "annuel"]),
        ("Check whether Bimbamjob paid invoice F-2024-077", ["Bimbamjob", "paid", "invoice", "F-2024-077"]),
        ("Que dit le web sur l’optimisation des tournées ?", ["optimisation", "tournées"]),
    ],
)
def test_the_topic_leaves_out_the_words_that_say_what_to_do(question: str, topic: list[str]) -> None:
    assert triggers.topic(question) == topic


# The main model's first response, per trigger and language ---------------------------------------


@pytest.mark.parametrize("language", LANGS)
def test_a_computation_asked_with_code_enabled_runs_a_script_over_the_table(language: Language) -> None:
    h = demo([code_tools(sandbox(), knowledge())])
    response = first_response(h, QUESTIONS["code"][language], ("kb:factures", "code"), language)
    code = arguments(response, "run_code")["code"]
    assert code.splitlines()[0] == say("code_comment", language)
    assert response.text == say("code_computing", language)


@pytest.mark.parametrize("language", LANGS)
def test_without_code_a_computation_is_the_usual_search(language: Language) -> None:
    response = first_response(demo(), QUESTIONS["code"][language], ("kb:factures",), language)
    assert [c.name for c in response.tool_calls] == ["kb_search"]


def web_factories() -> list[ToolFactory]:
    return [web_tools(WebConfig(search_url="http://search.invalid/search"))]


@pytest.mark.parametrize("language", LANGS)
def test_the_web_asked_about_is_searched_by_the_main_model(language: Language) -> None:
    h = demo(web_factories())
    response = first_response(h, QUESTIONS["web"][language], ("kb:factures", "web"), language, level="standard")
    query = {"en": "route optimisation", "fr": "l’optimisation des tournées"}[language]
    assert arguments(response, "web_search")["query"] == query == triggers.web_query(QUESTIONS["web"][language])
    assert response.text == say("web_searching", language)


@pytest.mark.parametrize("language", LANGS)
def test_the_web_asked_about_is_handed_to_an_agent_given_the_web(language: Language) -> None:
    h = demo(web_factories())
    response = first_response(h, QUESTIONS["web"][language], ("kb:factures", "web", "agents"), language)
    [task] = arguments(response, "agents")["tasks"]
    assert task["resources"] == ["web"]
    query = triggers.web_query(QUESTIONS["web"][language])
    assert task["instruction"] == say("web_instruction", language, query=query)


@pytest.mark.parametrize("language", LANGS)
def test_a_check_goes_to_the_checking_profile_the_agents_tool_offers(language: Language) -> None:
    response = first_response(demo(), QUESTIONS["check"][language], ("kb:factures", "agents"), language)
    [task] = arguments(response, "agents")["tasks"]
    assert task["profile"] == CHECKER
    assert task["resources"] == ["kb:factures"]
    assert response.text == say("check_handing", language, model="demo-small")


def test_without_a_checking_profile_a_check_is_the_usual_delegation() -> None:
    h = demo(policy=Policy())
    response = first_response(h, QUESTIONS["check"]["en"], ("kb:factures", "agents"), "en")
    [task] = arguments(response, "agents")["tasks"]
    assert "profile" not in task


@pytest.mark.parametrize("language", LANGS)
def test_a_whole_document_is_handed_to_agents_told_to_go_on_with_from_char(language: Language) -> None:
    response = first_response(demo(), QUESTIONS["whole"][language], ("kb:rapports", "agents"), language)
    [task] = arguments(response, "agents")["tasks"]
    words = ", ".join(triggers.topic(QUESTIONS["whole"][language]))
    assert task["instruction"] == say("whole_instruction", language, words=words)
    assert "from_char" in task["instruction"]


@pytest.mark.parametrize("language", LANGS)
def test_without_agents_a_whole_document_is_first_searched_by_the_main_model(language: Language) -> None:
    response = first_response(demo(), QUESTIONS["whole"][language], ("kb:rapports",), language)
    words = " ".join(triggers.topic(QUESTIONS["whole"][language]))
    assert [arguments(response, "kb_search")] == [{"query": words, "kb": "rapports"}]
    assert response.text == say("whole_searching", language)


@pytest.mark.parametrize("language", LANGS)
def test_an_ordinary_question_keeps_the_procedure(language: Language) -> None:
    question = {"en": "Bimbamjob: invoices and payments", "fr": "Bimbamjob : factures et paiements"}[language]
    h = demo([code_tools(sandbox(), knowledge()), *web_factories()])
    response = first_response(h, question, ("kb:factures", "kb:rapports", "code", "web", "agents"), language)
    tasks = arguments(response, "agents")["tasks"]
    assert [t["resources"] for t in tasks] == [["kb:factures"], ["kb:rapports"]]
    assert all("profile" not in t and "from_char" not in t["instruction"] for t in tasks)


# Whole runs ------------------------------------------------------------------------------------


def tool_calls(h: Harness, name: str) -> list[dict[str, Any]]:
    return [e.arguments for e in h.of(ToolCallEvent) if e.name == name]


@pytest.mark.parametrize("language", RUN_LANGS)
async def test_run_code_totals_the_invoices_table_per_client(language: Language) -> None:
    h = demo([code_tools(sandbox(), knowledge())])
    outcome = await h.run(QUESTIONS["code"][language], resources=("kb:factures", "code"), model="demo-large")

    assert outcome.status == "ok"
    [result] = [e for e in h.of(ToolResultEvent) if e.name == "run_code"]
    assert result.ok and result.action is not None and result.action.label == say("code_comment", language)
    assert "doc-table" in {s.id for s in result.sources}
    # The totals are the table's: 18,400 + 6,250 for Bimbamjob, 4,200 + 12,000 for Tamaris Conseil.
    amount = "24,650.00" if language == "en" else "24\u00a0650,00"
    assert f"| Bimbamjob | {amount} | 2 |" in outcome.text
    assert outcome.text.index("Bimbamjob") < outcome.text.index("Tamaris Conseil") < outcome.text.index("Orchidée")
    title = TABLE_TITLES[language]
    totals = say("code_totals", language, title=title, id="doc-table", summed="montant", group="client", rows=5)
    assert totals in outcome.text
    assert TABLE_TITLES["en" if language == "fr" else "fr"] not in outcome.text  # the reader's title only
    assert outcome.text.endswith(say("footer", language))


@pytest.mark.parametrize("language", RUN_LANGS)
async def test_the_main_model_reads_a_long_document_in_parts_with_from_char(language: Language) -> None:
    h = demo()
    outcome = await h.run(QUESTIONS["whole"][language], resources=("kb:rapports",), model="demo-large")

    doc = report(language)
    reads = tool_calls(h, "kb_read")
    starts = [r.get("from_char", 0) for r in reads]
    assert starts == list(range(0, len(doc.text), MAX_CHARS_PER_DOCUMENT))  # every part, in order
    assert all(r["ids"] == [doc.id] for r in reads)  # the question's language finds its own
    ends = [min(s + MAX_CHARS_PER_DOCUMENT, len(doc.text)) for s in starts]
    ranges = ", ".join(f"{number(s, language)}–{number(e, language)}" for s, e in zip(starts, ends, strict=True))
    assert say("whole_read", language, title=doc.title, id=doc.id, count=len(starts), ranges=ranges) in outcome.text
    conclusions = "Conclusions and recommendations" if language == "en" else "Conclusions et recommandations"
    assert conclusions in outcome.text  # the last part was read


@pytest.mark.parametrize("language", RUN_LANGS)
async def test_at_approfondi_the_agent_lands_forced_and_is_relaunched_on_the_rest(language: Language) -> None:
    h = demo()
    outcome = await h.run(QUESTIONS["whole"][language], resources=("kb:rapports", "agents"), model="demo-large")

    assert outcome.status == "ok"
    first, second = outcome.agents
    # Approfondi gives 5 rounds: a search and three parts, then the forced landing with what was read.
    assert (first.status, first.rounds, first.forced_landing) == ("interrupted", 5, True)
    assert first.tools_run == ["kb_search", "kb_read", "kb_read", "kb_read"]
    stopped = 3 * MAX_CHARS_PER_DOCUMENT
    assert f"from_char={stopped}" in first.report
    # A second agents call: one agent, on that document only, from where the first stopped.
    assert len(tool_calls(h, "agents")) == 2
    doc = report(language)
    assert second.task.instruction == say(
        "relaunch_instruction", language, id=doc.id, title=doc.title, start=stopped, at=number(stopped, language)
    )
    assert [d.id for d in second.task.documents] == [doc.id]
    assert (second.status, second.forced_landing) == ("ok", False)
    [relaunched_start] = [e for e in h.of(AgentStarted) if e.agent_id == second.agent_id]
    assert relaunched_start.documents[0].id == doc.id
    conclusions = "Conclusions and recommendations" if language == "en" else "Conclusions et recommandations"
    assert conclusions in second.report and conclusions not in first.report
    relaunched = say(
        "relaunch_note",
        language,
        Agent=agent_words(first.agent_id).capitalize(),
        start=number(stopped, language),
        title=doc.title,
        relaunched=agent_words(second.agent_id),
    )
    assert relaunched in outcome.text


@pytest.mark.parametrize("language", RUN_LANGS)
async def test_at_maximal_one_agent_reads_the_whole_document(language: Language) -> None:
    h = demo()
    outcome = await h.run(
        QUESTIONS["whole"][language], resources=("kb:rapports", "agents"), level="maximal", model="demo-large"
    )

    [agent] = outcome.agents
    parts = -(-len(report(language).text) // MAX_CHARS_PER_DOCUMENT)
    assert (agent.status, agent.rounds, agent.forced_landing) == ("ok", parts + 2, False)
    assert len(tool_calls(h, "agents")) == 1
    assert all(not e.forced_landing for e in h.of(AgentFinished))


@pytest.mark.parametrize("language", RUN_LANGS)
async def test_the_checking_profile_quotes_what_confirms_or_contradicts_the_claim(language: Language) -> None:
    h = demo()
    outcome = await h.run(QUESTIONS["check"][language], resources=("kb:factures", "agents"), model="demo-large")

    [agent] = outcome.agents
    [started] = h.of(AgentStarted)
    assert started.profile == CHECKER and agent.task.profile is not None
    assert agent.status == "ok"
    own = "doc-77" if language == "en" else "doc-78"
    assert f"[{own}]" in agent.report
    assert say("check_profile_note", language) in outcome.text


class _Web(BaseHTTPRequestHandler):
    """A SearxNG-compatible search and two pages, on the loopback (allowed for the test's fetcher)."""

    base = ""
    PAGES = {
        "/routes": (
            "Route optimisation in 2024",
            "Route optimisation cut the kilometres driven by regional carriers by a tenth in 2024.",
        ),
        "/tournees": (
            "Optimisation des tournées en 2024",
            "L’optimisation des tournées a réduit d’un dixième les kilomètres des transporteurs régionaux en 2024.",
        ),
    }

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/search":
            query = parse_qs(url.query)["q"][0].lower()
            results = [
                {"url": f"{self.base}{path}", "title": title, "content": text[:80]}
                for path, (title, text) in self.PAGES.items()
                if all(word in text.lower() for word in query.split())
            ]
            body, kind = json.dumps({"results": results}).encode(), "application/json"
        elif url.path in self.PAGES:
            title, text = self.PAGES[url.path]
            body = f"<html><head><title>{title}</title></head><body><p>{text}</p></body></html>".encode()
            kind = "text/html; charset=utf-8"
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def web_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    _Web.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _Web.base
    server.shutdown()
    server.server_close()


def local_web(base: str) -> list[ToolFactory]:
    host = urlsplit(base).netloc
    return [web_tools(WebConfig(search_url=f"{base}/search", allowed_hosts=frozenset({host}), timeout=5.0))]


@pytest.mark.parametrize(("language", "page"), [("en", "/routes"), ("fr", "/tournees")][: len(RUN_LANGS)])
async def test_the_main_model_searches_the_web_then_reads_the_pages_found(
    web_server: str, language: Language, page: str
) -> None:
    h = demo(local_web(web_server))
    outcome = await h.run(QUESTIONS["web"][language], resources=("web",), level="standard", model="demo-large")

    assert [e.name for e in h.of(ToolCallEvent)] == ["web_search", "web_fetch"]
    assert tool_calls(h, "web_fetch") == [{"url": f"{web_server}{page}"}]
    assert f"[{web_server}{page}]" in outcome.text
    topic = {"en": "route, optimisation", "fr": "optimisation, tournées"}[language]
    assert say("web_answer", language, topic=topic) in outcome.text
    [fetched] = [e for e in h.of(ToolResultEvent) if e.name == "web_fetch"]
    assert [s.kind for s in fetched.sources] == ["page"]


@pytest.mark.parametrize(("language", "page"), [("en", "/routes"), ("fr", "/tournees")][: len(RUN_LANGS)])
async def test_an_agent_given_the_web_searches_then_fetches(web_server: str, language: Language, page: str) -> None:
    h = demo(local_web(web_server))
    outcome = await h.run(QUESTIONS["web"][language], resources=("kb:factures", "web", "agents"), model="demo-large")

    [agent] = outcome.agents
    assert agent.status == "ok"
    assert agent.tools_run == ["web_search", "web_fetch"]
    assert [s.id for s in agent.sources] == [f"{web_server}{page}"]
    assert f"[{web_server}{page}]" in outcome.text


@pytest.mark.parametrize(("language", "site"), [("en", "/en/news/"), ("fr", "/fr/actualites/")])
async def test_over_the_demo_web_each_language_reads_its_own_page(language: Language, site: str) -> None:
    h = demo([demo_web_tools(WebConfig(search_url="demo", fetch=True))])
    outcome = await h.run(QUESTIONS["web"][language], resources=("web",), level="standard", model="demo-large")

    [fetch] = tool_calls(h, "web_fetch")
    assert fetch["url"].startswith("https://orchidee-logistique.demo.example" + site)
    assert f"[{fetch['url']}]" in outcome.text
