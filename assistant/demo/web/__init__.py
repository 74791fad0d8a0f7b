"""The demo web: a few fictional pages, in French and English, that the project ships and reads offline.

The offline demo (``make run``, ``DEMO_WEB=1``) has no network, so ``web_search`` and ``web_fetch`` go to
this corpus instead of the internet, through the same protocols as the real backends (``web.SearchBackend``,
``web.Fetcher``): the tools, their actions in the panel and the sources under the answer are the real path.
Everything they return says it is the demo web (``demo_web``).

The pages are files under ``pages/``, one folder per fictional site: ``pages/<host>/<path>.html`` is the page
``https://<host>/<path>``. Every host ends in ``.demo.example`` (``.example`` is reserved: no such site can
exist). They are about the demo organisation's clients and the questions its bases raise (late payment
penalties, a client's news). Each page is read once, its text extracted as ``web_fetch`` extracts any page,
and indexed with BM25 (``knowledge.Bm25Index``); a search prefers pages in the query's language.
"""

from __future__ import annotations

import asyncio
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from assistant.engine.errors import ToolError
from assistant.engine.knowledge import Bm25Index, terms
from assistant.engine.tools import Document, ToolFactory
from assistant.engine.web import FetchedPage, SearchHit, WebConfig, html_to_text, web_tools

DEMO_HOST_SUFFIX = ".demo.example"
PAGES = Path(__file__).with_name("pages")
LANGUAGE_BOOST = 1.5
"""How much a page in the query's language weighs over one in the other language, score for score."""

# Words that say a query's language and that a search ignores (they would match every page of a language).
_FRENCH = frozenset(
    terms(
        """le la les un une des du de et est sont ou que qui quoi quel quelle quels quelles pour par sur dans avec au
    aux ce cet cette ces se sa son ses leur leurs nous vous il elle ils elles je on pas plus très dit disent
    dire web internet cherche chercher trouve trouver actualité actualités nouvelles moi me ça cela dis donne
    montre peux pouvez savoir sait"""
    )
)
_ENGLISH = frozenset(
    terms(
        """the a an and is are of for on in at to from with what which who about does do did say says said news
    web internet search find look latest any there their its this that these those how why it be was were has
    have can could will me my our you your tell show give know"""
    )
)
_LANG = re.compile(r"<html[^>]*\blang=\"([a-z]{2})", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DemoPage:
    """One page of the demo web: its address, language, title, extracted text and the file's bytes."""

    url: str
    lang: str
    title: str
    text: str
    html: bytes


def page_address(url: str) -> str | None:
    """The demo web's address of ``url`` (https, host lower-case, no trailing slash, query or fragment), or None
    when it is not an address of the demo web."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host.endswith(DEMO_HOST_SUFFIX):
        return None
    path = parts.path.rstrip("/")
    return f"https://{host}{path or '/'}"


def query_language(query: str) -> str | None:
    """``fr`` or ``en`` when the query's function words say so, else None."""
    words = terms(query)
    french = sum(w in _FRENCH for w in words)
    english = sum(w in _ENGLISH for w in words)
    if french == english:
        return None
    return "fr" if french > english else "en"


class DemoWeb:
    """The corpus: every page of ``directory``, read and indexed once."""

    def __init__(self, directory: Path = PAGES) -> None:
        self.pages: dict[str, DemoPage] = {}
        for file in sorted(directory.rglob("*.html")):
            relative = file.relative_to(directory).with_suffix("")
            host, *path = relative.parts
            url = f"https://{host}/{'/'.join(path)}"
            html = file.read_bytes()
            lang = _LANG.search(html.decode("utf-8", "replace"))
            title, text = html_to_text(html, url)
            self.pages[url] = DemoPage(url, lang.group(1).lower() if lang else "", title or url, text, html)
        # Indexed as documents whose base is their language: a hit's ``kb`` says the page's language.
        self._index = Bm25Index(Document(p.url, p.lang, p.title, p.text) for p in self.pages.values())

    def __len__(self) -> int:
        return len(self.pages)

    def page(self, url: str) -> DemoPage | None:
        address = page_address(url)
        return self.pages.get(address) if address else None

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """At most ``limit`` pages matching the query's words (function words left out), best first; among
        equal matches, the query's language first."""
        lang = query_language(query)
        words = " ".join(t for t in terms(query) if t not in _FRENCH and t not in _ENGLISH)
        hits = self._index.search(words)
        weighted = sorted(hits, key=lambda h: (-h.score * (LANGUAGE_BOOST if h.kb == lang else 1.0), h.id))
        return [SearchHit(url=h.id, title=h.title, snippet=h.snippet) for h in weighted[:limit]]


@functools.cache
def demo_web() -> DemoWeb:
    """The shipped corpus, read on first use."""
    return DemoWeb()


async def _corpus(web: DemoWeb | None) -> DemoWeb:
    return web if web is not None else await asyncio.to_thread(demo_web)


class DemoSearch:
    """``web_search`` over the demo web (a ``web.SearchBackend``)."""

    demo_web = True

    def __init__(self, web: DemoWeb | None = None) -> None:
        self.web = web

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        return (await _corpus(self.web)).search(query, limit)


class DemoFetcher:
    """``web_fetch`` of the demo web's pages (a ``web.Fetcher``); any other address is refused, never fetched."""

    demo_web = True

    def __init__(self, web: DemoWeb | None = None) -> None:
        self.web = web

    async def fetch(self, url: str) -> FetchedPage:
        if page_address(url) is None:
            raise ToolError(
                f"{url} is not on the demo web. The demo web is on: web_fetch reads only its fictional pages "
                f"(addresses ending in {DEMO_HOST_SUFFIX}, as web_search returns them), never the internet."
            )
        page = (await _corpus(self.web)).page(url)
        if page is None:
            raise ToolError(f"{url} answered HTTP 404: the demo web has no such page; web_search finds its pages.")
        return FetchedPage(url=page.url, content_type="text/html", body=page.html)


def demo_web_tools(config: WebConfig, web: DemoWeb | None = None) -> ToolFactory:
    """``web_search`` and ``web_fetch`` over the demo web, for scopes with ``web`` (``config``: their limits)."""
    return web_tools(config, DemoSearch(web), DemoFetcher(web))
