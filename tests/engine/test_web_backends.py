"""web_search and web_fetch behind their two protocols: the real backends (SearxNG, the guarded fetcher, against
a local server) and the demo web's (the pages the project ships) give the tools the same shape of results;
the demo web's say so everywhere, find each language's pages, and never leave the corpus. Then whole runs,
through scripted models, searching and reading the demo web: the main model itself, and an agent."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from assistant.demo.web import DEMO_HOST_SUFFIX, PAGES, DemoFetcher, DemoSearch, DemoWeb, demo_web, demo_web_tools
from assistant.engine.errors import ToolError
from assistant.engine.events import AgentAction, AgentFinished, ToolResultEvent
from assistant.engine.models.function import CallInfo
from assistant.engine.policy import Policy
from assistant.engine.scope import Scope
from assistant.engine.types import ModelRequest, ModelResponse
from assistant.engine.web import (
    DEMO_WEB_NOTICE,
    Fetcher,
    GuardedFetcher,
    SearchBackend,
    SearxngSearch,
    WebConfig,
    WebFetch,
    WebSearch,
)
from tests.engine.engine_support import AGENT_A, MAIN, call, delegate, harness, reply, submit, task, tool_payloads

PAGE = b"""<!doctype html><html lang="en"><head><title>Late payment news</title></head><body>
<nav>Home | Contact</nav><article><h1>Late payment news</h1>
<p>Penalties for late payment between businesses are three times the legal interest rate at least.</p>
</article></body></html>"""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/search":
            host = self.headers["Host"]
            body = json.dumps(
                {"results": [{"url": f"http://{host}/news", "title": "Late payment news", "content": "Penalties…"}]}
            ).encode()
            content_type = "application/json"
        elif path == "/news":
            body, content_type = PAGE, "text/html; charset=utf-8"
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def real(server: str) -> tuple[WebConfig, SearchBackend, Fetcher]:
    config = WebConfig(search_url=f"{server}/search", allowed_hosts=frozenset({urlsplit(server).netloc}), timeout=5)
    return config, SearxngSearch(config), GuardedFetcher(config)


def demo() -> tuple[WebConfig, SearchBackend, Fetcher]:
    return WebConfig(), DemoSearch(), DemoFetcher()


def demo_for(server: str) -> tuple[WebConfig, SearchBackend, Fetcher]:
    return demo()  # the demo's web needs no server


BACKENDS: dict[str, Callable[[str], tuple[WebConfig, SearchBackend, Fetcher]]] = {"real": real, "demo": demo_for}


# The same tools over either pair of backends ----------------------------------------------------------


@pytest.mark.parametrize("which", ["real", "demo"])
async def test_search_then_fetch_has_the_same_shape_over_either_backend(server: str, which: str) -> None:
    config, search, fetcher = BACKENDS[which](server)
    found = await WebSearch(config, search).run({"query": "late payment penalties"})
    results = json.loads(found.content)
    assert results["query"] == "late payment penalties"
    assert results["count"] == len(results["results"]) >= 1
    first = results["results"][0]
    assert set(first) == {"url", "title", "snippet"} and "payment" in first["title"].lower()
    assert found.action is not None and (found.action.kind, found.action.count) == ("search", results["count"])

    read = await WebFetch(config, fetcher).run({"url": first["url"]})
    page = json.loads(read.content)
    assert page["url"] == first["url"] and page["title"] == first["title"]
    assert "three times the legal interest rate" in page["text"]
    [source] = read.sources
    assert (source.id, source.kind, source.where) == (first["url"], "page", urlsplit(first["url"]).hostname)
    assert read.action is not None and (read.action.kind, read.action.label) == ("fetch", first["url"])

    # Only the demo web's say they are the demo web: in the tools' descriptions, results, actions and sources.
    is_demo = which == "demo"
    for outcome, payload in ((found, results), (read, page)):
        assert outcome.action is not None and outcome.action.demo_web is is_demo
        assert payload.get("demo_web") == (DEMO_WEB_NOTICE if is_demo else None)
    assert source.demo_web is is_demo
    descriptions = WebSearch(config, search).spec.description + WebFetch(config, fetcher).spec.description
    assert ("demo web" in descriptions) is is_demo
    assert ("not the internet" in descriptions) is is_demo


async def test_the_real_backends_are_the_default_ones(server: str) -> None:
    config, _, _ = real(server)
    assert isinstance(WebSearch(config).backend, SearxngSearch)
    assert isinstance(WebFetch(config).fetcher, GuardedFetcher)
    tools = {t.spec.name: t for t in demo_web_tools(config)(Scope(web=True))}
    assert isinstance(tools["web_search"], WebSearch) and isinstance(tools["web_search"].backend, DemoSearch)
    assert isinstance(tools["web_fetch"], WebFetch) and isinstance(tools["web_fetch"].fetcher, DemoFetcher)
    assert demo_web_tools(WebConfig())(Scope(("factures",))) == []  # a scope without the web gets none


# The demo web's corpus ------------------------------------------------------------------------------


def test_the_corpus_is_fictional_bilingual_and_every_page_is_a_file() -> None:
    web = demo_web()
    files = sorted(PAGES.rglob("*.html"))
    assert 6 <= len(web) == len(files) <= 12
    for url, page in web.pages.items():
        host = urlsplit(url).hostname or ""
        assert url.startswith("https://") and host.endswith(DEMO_HOST_SUFFIX), url
        assert page.lang in ("fr", "en") and page.title and len(page.text) > 300, url
    hosts = {urlsplit(u).hostname: set() for u in web.pages}  # type: dict[str | None, set[str]]
    for url, page in web.pages.items():
        hosts[urlsplit(url).hostname].add(page.lang)
    assert all(langs == {"fr", "en"} for langs in hosts.values()), hosts  # each site in both languages


@pytest.mark.parametrize(
    ("query", "first", "lang"),
    [
        ("Que dit le web sur Bimbamjob ?", "actu-entreprises.demo.example/fr/", "fr"),
        ("What does the web say about Bimbamjob?", "actu-entreprises.demo.example/en/", "en"),
        ("pénalités de retard et mise en demeure", "droit-commercial.demo.example/fr/", "fr"),
        ("late payment penalties and formal notice", "droit-commercial.demo.example/en/", "en"),
        ("Orchidée Logistique tournées kilomètres", "orchidee-logistique.demo.example/fr/", "fr"),
        ("Verdant Foods data audit", "verdant-foods.demo.example/en/", "en"),
    ],
)
async def test_a_demo_search_finds_the_page_in_the_query_s_language_first(query: str, first: str, lang: str) -> None:
    hits = await DemoSearch().search(query, 8)
    assert hits and first in hits[0].url, [h.url for h in hits]
    assert demo_web().pages[hits[0].url].lang == lang
    assert hits[0].snippet.rstrip("…")[:80] in " ".join(demo_web().pages[hits[0].url].text.split())


async def test_a_demo_search_keeps_to_its_limit_and_finds_nothing_for_unknown_words() -> None:
    assert len(await DemoSearch().search("Bimbamjob Tamaris Orchidée Verdant", 2)) == 2
    assert await DemoSearch().search("zeppelin quasar", 8) == []
    assert await DemoSearch().search("what does the web say about it", 8) == []  # function words match nothing
    outcome = await WebSearch(WebConfig(results=1), DemoSearch()).run({"query": "Bimbamjob"})
    assert json.loads(outcome.content)["count"] == 1


async def test_a_demo_fetch_normalises_the_address_and_says_which_was_asked() -> None:
    url = "https://tamaris-conseil.demo.example/en/training"
    asked = "http://Tamaris-Conseil.demo.example/en/training/?utm=x#top"
    data = json.loads((await WebFetch(WebConfig(), DemoFetcher()).run({"url": asked})).content)
    assert (data["url"], data["requested_url"]) == (url, asked)
    assert "4.6 out of 5" in data["text"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://example.org/wind", "is not on the demo web.*never the internet"),
        ("http://127.0.0.1:9/", "is not on the demo web"),
        ("file:///etc/passwd", "is not on the demo web"),
        ("https://droit-commercial.demo.example/fr/nulle-part", "HTTP 404: the demo web has no such page"),
    ],
)
async def test_a_demo_fetch_reads_only_the_corpus(url: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        await WebFetch(WebConfig(), DemoFetcher()).run({"url": url})


async def test_a_corpus_is_read_from_its_folder(tmp_path: Path) -> None:
    site = tmp_path / "site.demo.example" / "fr"
    site.mkdir(parents=True)
    (site / "page.html").write_text(
        '<html lang="fr"><head><title>Essai</title></head><body><p>Un texte d\'essai sur les zeppelins.</p></body></html>'
    )
    web = DemoWeb(tmp_path)
    assert list(web.pages) == ["https://site.demo.example/fr/page"]
    [hit] = await DemoSearch(web).search("zeppelins", 8)
    assert hit.url == "https://site.demo.example/fr/page" and hit.title == "Essai"
    page = await DemoFetcher(web).fetch(hit.url)
    assert page.content_type == "text/html" and b"zeppelins" in page.body


# Whole runs over the demo web --------------------------------------------------------------------------


def searcher_then_reader(question_reply: str) -> Any:
    """A model that searches the demo web, reads the first result, then answers (or submits, as an agent)."""

    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        searches = tool_payloads(request, "web_search")
        fetched = tool_payloads(request, "web_fetch")
        if not searches:
            return reply(call("web_search", query="Bimbamjob levée de fonds"))
        if not fetched:
            return reply(call("web_fetch", url=searches[0]["results"][0]["url"]))
        page = fetched[0]
        if any(t.name == "submit_result" for t in request.tools):
            return reply(submit(f"{page['title']} ({page['url']})", [page["url"]]))
        return reply(text=f"{question_reply} {page['title']}.")

    return function


async def test_the_main_model_searches_and_reads_the_demo_web_and_the_page_is_a_source() -> None:
    h = harness({MAIN.id: searcher_then_reader("Selon le web de démo :")}, factories=[demo_web_tools(WebConfig())])
    outcome = await h.run("Que dit le web sur Bimbamjob ?", resources=("web",))

    assert outcome.status == "ok"
    assert outcome.text == "Selon le web de démo : Bimbamjob reporte sa levée de fonds et gèle ses recrutements."
    results = h.of(ToolResultEvent)
    assert [r.name for r in results] == ["web_search", "web_fetch"]
    assert all(r.action is not None and r.action.demo_web for r in results)
    url = "https://actu-entreprises.demo.example/fr/2024/bimbamjob-reporte-sa-levee-de-fonds"
    assert [(s.id, s.kind, s.demo_web) for s in h.ctx.sources.values()] == [(url, "page", True)]
    assert "demo web" in {t.name: t.description for t in h.main.requests[0].tools}["web_search"]


async def test_an_agent_given_the_web_reads_the_demo_web_and_its_page_joins_the_run_s_sources() -> None:
    main_calls = [
        reply(delegate(task("Cherche sur le web les nouvelles de Bimbamjob.", AGENT_A.id, ["web"]))),
        reply(text="D'après l'agent, Bimbamjob reporte sa levée de fonds."),
    ]
    h = harness(
        {
            MAIN.id: lambda request, info: main_calls[info.index],
            AGENT_A.id: searcher_then_reader(""),
        },
        factories=[demo_web_tools(WebConfig())],
        policy=Policy(),
    )
    outcome = await h.run("Que dit le web sur Bimbamjob ?", resources=("web", "agents"))

    assert outcome.status == "ok" and [a.status for a in outcome.agents] == ["ok"]
    actions = [e.action for e in h.of(AgentAction)]
    assert [(a.tool, a.kind, a.demo_web) for a in actions] == [
        ("web_search", "search", True),
        ("web_fetch", "fetch", True),
    ]
    [finished] = h.of(AgentFinished)
    url = "https://actu-entreprises.demo.example/fr/2024/bimbamjob-reporte-sa-levee-de-fonds"
    assert [(s.id, s.demo_web) for s in finished.sources] == [(url, True)]
    assert url in h.ctx.sources and h.ctx.sources[url].demo_web
