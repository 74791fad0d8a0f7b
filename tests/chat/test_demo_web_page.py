"""The demo web as a signed-in user meets it (``DEMO_WEB``): runs through the composer's path whose models (the only
fakes) search and read it, the main model itself or an agent; the page's actions, the agent panel and the sources
list say it is the demo web, in English and French; a source opens the page's text here; the composer offers the
demo web, and so does the export; without DEMO_WEB the web tools are the real ones (or none)."""

from __future__ import annotations

import json
from html import unescape
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import AsyncClient, Client
from pytest_django import Settings

from assistant.api.trace import trace_of
from assistant.catalogue import snapshot
from assistant.chat.rendering import render_markdown
from assistant.demo.web import DemoFetcher, DemoSearch
from assistant.engine.models.base import Model
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.notes import without_note
from assistant.engine.scope import Scope
from assistant.engine.types import ModelRequest, ModelResponse, ToolCall
from assistant.engine.web import GuardedFetcher, SearxngSearch, WebFetch, WebSearch
from assistant.knowledge.tools import available_resources
from assistant.orgs.models import Organisation
from assistant.runs import execution
from assistant.runs.models import Run
from tests.demo_web_models import MODELS

pytestmark = pytest.mark.django_db(transaction=True)

PAGE_FR = "https://actu-entreprises.demo.example/fr/2024/bimbamjob-reporte-sa-levee-de-fonds"
PAGE_EN = "https://actu-entreprises.demo.example/en/2024/bimbamjob-postpones-fundraising"
TITLE_FR = "Bimbamjob reporte sa levée de fonds et gèle ses recrutements"


@pytest.fixture
def demo_web(settings: Settings, fast_demo: None) -> None:
    settings.DEMO_WEB = True
    settings.WEB_SEARCH_URL = ""
    settings.WEB_FETCH_ENABLED = False


def _payloads(request: ModelRequest, name: str) -> list[dict[str, Any]]:
    return [json.loads(without_note(m.content)) for m in request.messages if m.role == "tool" and m.name == name]


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"{name}-{len(json.dumps(arguments))}", name=name, arguments=json.dumps(arguments))


def web_reader(request: ModelRequest, info: CallInfo) -> ModelResponse:
    """Searches the web, reads the first result, then answers (submits, as an agent)."""
    searches, fetched = _payloads(request, "web_search"), _payloads(request, "web_fetch")
    if not searches:
        return ModelResponse(tool_calls=[_call("web_search", query="Bimbamjob levée de fonds")])
    if not fetched:
        return ModelResponse(tool_calls=[_call("web_fetch", url=searches[0]["results"][0]["url"])])
    page = fetched[0]
    if any(t.name == "submit_result" for t in request.tools):
        report = {"findings": f"{page['title']}.", "sources": [page["url"]]}
        return ModelResponse(tool_calls=[_call("submit_result", **report)])
    return ModelResponse(text=f"Selon le web de démo : {page['title']}.")


def delegating(request: ModelRequest, info: CallInfo) -> ModelResponse:
    if info.index == 0:
        task = {
            "instruction": "Cherche les nouvelles de Bimbamjob sur le web.",
            "model": "demo-small",
            "resources": ["web"],
        }
        return ModelResponse(tool_calls=[_call("agents", tasks=[task])])
    return ModelResponse(text="D'après l'agent, Bimbamjob reporte sa levée de fonds.")


async def _ask(monkeypatch: pytest.MonkeyPatch, main: Any, resources: list[str]) -> tuple[AsyncClient, Run]:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    models: dict[str, Any] = {"demo-large": main, "demo-small": web_reader}

    def resolve(model_id: str) -> Model:
        return FunctionModel(models[model_id], snapshot.catalogue()[model_id])

    monkeypatch.setattr(snapshot, "resolve", resolve)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    ask = {
        "text": "Que dit le web sur Bimbamjob ?",
        "model": "demo-large",
        "level": "approfondi",
        "resources": resources,
    }
    response = await client.post("/c/new", ask)
    assert response.status_code == 302, response.content.decode()[:500]
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "ok", run.error
    return client, run


async def _page(client: AsyncClient, run: Run, language: str) -> str:
    client.cookies["django_language"] = language
    return unescape((await client.get(f"/c/{run.conversation_id}/")).content.decode())


def _sources(page: str) -> str:
    return page.split('<div class="sources">')[1].split("</div>")[0]


async def test_the_main_model_s_searches_and_reads_of_the_demo_web_say_so_and_its_page_is_a_source(
    demo_web: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, run = await _ask(monkeypatch, web_reader, ["web"])

    assert run.answer == f"Selon le web de démo : {TITLE_FR}."
    assert run.sources == [
        {"id": PAGE_FR, "title": TITLE_FR, "kind": "page", "where": "actu-entreprises.demo.example",
         "start": None, "end": None, "demo_web": True},
    ]  # fmt: skip

    english = await _page(client, run, "en")
    assert "Search of the demo web “Bimbamjob levée de fonds”: 2 results" in english
    assert f"Fetch from the demo web: {PAGE_FR}" in english
    sources = _sources(english)
    assert f'<a href="/demo-web/?url={quote(PAGE_FR, safe="")}">{TITLE_FR}</a>' in sources
    assert "(demo web: actu-entreprises.demo.example)" in sources
    assert 'target="_blank"' not in sources  # a fictional address is never opened as a link to the internet

    french = await _page(client, run, "fr")
    assert "Recherche sur le web de démo « Bimbamjob levée de fonds » : 2 résultats" in french
    assert f"Lecture de la page du web de démo : {PAGE_FR}" in french
    assert "(web de démo : actu-entreprises.demo.example)" in _sources(french)

    # The API's trace of the run says it: each step's action, its sources and the run's sources.
    trace = await sync_to_async(lambda: trace_of(list(run.steps.all()), run.usage, run.sources))()
    dumped = trace.model_dump()
    assert [(s["tool"], s["action"]["demo_web"]) for s in dumped["steps"]] == [
        ("web_search", True),
        ("web_fetch", True),
    ]
    assert [(s["id"], s["demo_web"]) for s in dumped["sources"]] == [(PAGE_FR, True)]

    # The export says it too: the JSON's sources carry demo_web, the Markdown's say so in the reader's language.
    exported = json.loads((await client.get(f"/c/{run.conversation_id}/export.json")).content)
    assert [s["demo_web"] for s in exported["turns"][0]["sources"]] == [True]
    markdown = (await client.get(f"/c/{run.conversation_id}/export.md")).content.decode()
    assert f"- {TITLE_FR} ({PAGE_FR}, actu-entreprises.demo.example) — une page du web de démo, fictive" in markdown


async def test_an_agent_s_demo_web_actions_show_in_its_line_and_panel_and_its_page_in_the_sources(
    demo_web: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, run = await _ask(monkeypatch, delegating, ["web", "agents"])

    assert [s["id"] for s in run.sources] == [PAGE_FR] and run.sources[0]["demo_web"] is True
    french = await _page(client, run, "fr")
    line = french.split('class="delegation')[1]
    assert "Recherche sur le web de démo « Bimbamjob levée de fonds » : 2 résultats" in line
    assert f"Lecture de la page du web de démo : {PAGE_FR}" in line
    assert TITLE_FR in _sources(french)

    client.cookies["django_language"] = "en"
    panel = unescape((await client.get(f"/c/{run.conversation_id}/runs/{run.pk}/agents/agent-1/")).content.decode())
    assert "Search of the demo web “Bimbamjob levée de fonds”: 2 results" in panel
    assert f"Fetch from the demo web: {PAGE_FR}" in panel


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_the_browser_test_s_run_reads_its_search_under_the_budget_note_and_ends_ok(
    demo_web: None, monkeypatch: pytest.MonkeyPatch, language: str
) -> None:
    """The demo-web browser test's run without a browser (its scripted models, ``tests/demo_web_models.py``): the
    main model's second request carries its search's result with the budget note after it, as sent; the models read
    the result's JSON without it, so the run delegates, answers and cites the page (it failed with "JSONDecodeError:
    Extra data" when a model parsed the result and its note as one JSON document)."""
    await sync_to_async(call_command)("load_demo", verbosity=0)
    functions = {model_id: FunctionModel(f, snapshot.catalogue()[model_id]) for model_id, f in MODELS.items()}
    monkeypatch.setattr(snapshot, "resolve", lambda model_id: functions[model_id])
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    question = "Que dit le web sur Bimbamjob ?" if language == "fr" else "What does the demo web say about Bimbamjob?"
    ask = {"text": question, "model": "demo-large", "level": "approfondi", "resources": ["web", "agents"]}
    assert (await client.post("/c/new", ask)).status_code == 302
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()

    assert run.status == "ok", run.error
    second = functions["demo-large"].requests[1].messages[-1]
    assert (second.role, second.name) == ("tool", "web_search")
    assert "\n\nBudget left: " in second.content  # the note stays for the model, after the result's JSON
    assert [s["id"] for s in run.sources] == [PAGE_FR if language == "fr" else PAGE_EN]
    assert run.answer.startswith("Selon le web de démo" if language == "fr" else "According to the demo web")


def test_a_demo_web_source_opens_its_page_s_text_labelled_as_the_demo_web(db: None) -> None:
    call_command("load_demo", verbosity=0)
    client = Client()
    assert client.get(f"/demo-web/?url={quote(PAGE_FR)}").status_code == 302  # signed out: to the sign-in page
    assert client.login(username="demo", password="demo-password")

    english = unescape(client.get(f"/demo-web/?url={quote(PAGE_FR)}").content.decode())
    assert f"<h1>{TITLE_FR}</h1>" in english
    assert "A page of the demo web: fictional, shipped with the assistant and read offline." in english
    assert f"Address in the demo web: {PAGE_FR}" in english
    assert "huit millions d'euros" in english and '<div class="document-text card" lang="fr">' in english
    assert "<script" not in english.split("<main")[1].split("</main>")[0]

    client.cookies["django_language"] = "fr"
    french = unescape(client.get(f"/demo-web/?url={quote(PAGE_FR)}").content.decode())
    assert "Une page du web de démo : fictive, livrée avec l’assistant et lue hors ligne." in french

    for missing in ("https://actu-entreprises.demo.example/fr/nulle-part", "https://example.org/", ""):
        assert client.get(f"/demo-web/?url={quote(missing)}").status_code == 404


def test_a_link_to_a_demo_web_page_in_a_text_opens_its_text_here() -> None:
    html = render_markdown(
        f"See {PAGE_FR}, [the guide](http://droit-commercial.demo.example/en/late-payment-penalties/) and "
        "[a real page](https://example.org/a), https://actu.demo.example.evil.org/x ."
    )
    assert (
        f'<a href="/demo-web/?url={quote(PAGE_FR, safe="")}" rel="noopener noreferrer nofollow">{PAGE_FR}</a>' in html
    )
    guide = quote("https://droit-commercial.demo.example/en/late-payment-penalties", safe="")
    assert f'<a href="/demo-web/?url={guide}" rel="noopener noreferrer nofollow">the guide</a>' in html
    assert '<a href="https://example.org/a"' in html  # the internet's addresses are left as they are
    assert '<a href="https://actu.demo.example.evil.org/x"' in html  # a look-alike host is not the demo web


def _composer_web(client: Client) -> str:
    page = unescape(client.get("/").content.decode())
    return page.split('name="resources" value="web"')[1].split("</label>")[0]


def test_the_composer_offers_the_demo_web_when_it_is_on(db: None, settings: Settings) -> None:
    call_command("load_demo", verbosity=0)
    client = Client()
    assert client.login(username="demo", password="demo-password")
    settings.DEMO_WEB, settings.WEB_SEARCH_URL, settings.WEB_FETCH_ENABLED = True, "", False
    assert _composer_web(client).strip().startswith("> Demo web")
    client.cookies["django_language"] = "fr"
    assert _composer_web(client).strip().startswith("> Web de démo")
    settings.DEMO_WEB, settings.WEB_FETCH_ENABLED = False, True
    assert _composer_web(client).strip().startswith("> Web")
    assert "démo" not in _composer_web(client)


def _web_tools(org: Organisation) -> dict[str, Any]:
    return {t.spec.name: t for t in execution.toolbox_for(org.pk).tools_for(Scope(web=True))}


def test_demo_web_wires_the_demo_backends_and_only_it_does(db: None, settings: Settings) -> None:
    call_command("load_demo", verbosity=0)
    org = Organisation.objects.get(slug="demo")
    settings.DEMO_WEB, settings.WEB_SEARCH_URL, settings.WEB_FETCH_ENABLED = False, "", False
    assert _web_tools(org) == {} and available_resources()["web"] is False

    settings.DEMO_WEB = True  # on, it wins over a configured SearxNG: nothing leaves the machine
    for search_url in ("", "http://127.0.0.1:9/search"):
        settings.WEB_SEARCH_URL = search_url
        tools = _web_tools(org)
        assert isinstance(tools["web_search"], WebSearch) and isinstance(tools["web_search"].backend, DemoSearch)
        assert isinstance(tools["web_fetch"], WebFetch) and isinstance(tools["web_fetch"].fetcher, DemoFetcher)
        assert available_resources()["web"] is True

    settings.DEMO_WEB, settings.WEB_FETCH_ENABLED = False, True
    tools = _web_tools(org)
    assert isinstance(tools["web_search"].backend, SearxngSearch)
    assert isinstance(tools["web_fetch"].fetcher, GuardedFetcher)
