"""Web tools: ``web_search(query)`` through a search backend, ``web_fetch(url)`` of one page through a fetcher.

Two protocols stand between the tools and the web: ``SearchBackend`` (a query to results) and ``Fetcher``
(an address to a page's bytes). The real ones are ``SearxngSearch`` (a SearxNG-compatible JSON endpoint)
and ``GuardedFetcher`` (httpx through the address guard); the offline demo web (``assistant.demo.web``:
fictional pages the project ships) implements the same two, so the tools, their actions and their sources are the
same path. A backend whose ``demo_web`` is true makes the tools say so: in their descriptions, in each
result (``demo_web``), in each action and each source.

``web_fetch`` reaches only public addresses: every connection it opens goes through the address
guard of ``netguard.py`` (each resolved address checked, the connection pinned to a checked one;
hosts an admin lists in ``allowed_hosts`` skip the check on ports 80 and 443, or on the port their
entry names). Redirects are followed one hop at a time, each hop checked the same way. Environment
proxies are ignored (a proxy would hide the real destination).

Errors the model should read (a refused address, a timeout, an HTTP error, a page too large) are
``ToolError``; the run goes on.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx2
import trafilatura

from .errors import OutOfScope, ToolError
from .events import Action, Source
from .netguard import AddressGuard, BlockedAddress, GuardedTransport, Resolver, allowed_ports
from .scope import Scope
from .tools import Tool, ToolFactory, ToolOutcome
from .types import ToolSpec

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "application/json", "text/xml", "application/xml")


@dataclass(frozen=True, slots=True, kw_only=True)
class WebConfig:
    """How the web tools reach the web. An empty ``search_url`` means no ``web_search``."""

    search_url: str = ""
    fetch: bool = True
    allowed_hosts: frozenset[str] = frozenset()
    """Hosts web_fetch may reach on any address: ``host`` (ports 80 and 443) or ``host:port``."""
    timeout: float = 15.0
    max_bytes: int = 5 * 1024 * 1024
    max_chars: int = 12_000
    max_redirects: int = 5
    results: int = 8
    user_agent: str = "Mozilla/5.0 (compatible; assistant-web-fetch/1.0)"
    resolve: Resolver | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        allowed_ports(self.allowed_hosts)  # a malformed entry is refused here, not at the first fetch

    @property
    def enabled(self) -> bool:
        return bool(self.search_url) or self.fetch


DEMO_WEB_NOTICE = (
    "The demo web: fictional pages shipped with the assistant and read offline, not the internet. "
    "Say so when you use them."
)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One result of a search: the page's address, its title and a snippet of its text."""

    url: str
    title: str
    snippet: str


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """What a fetcher read: the address it ended at (after redirects), the content type and the body."""

    url: str
    content_type: str
    body: bytes


class SearchBackend(Protocol):
    """Where ``web_search`` searches. ``search`` raises ``ToolError`` with a sentence the model can act on."""

    @property
    def demo_web(self) -> bool:
        """True when the results are the demo web's offline pages, not the internet's."""
        ...

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """At most ``limit`` results for ``query``, best first."""
        ...


class Fetcher(Protocol):
    """How ``web_fetch`` reads a page. ``fetch`` raises ``ToolError`` (``OutOfScope`` for a refused address)."""

    @property
    def demo_web(self) -> bool:
        """True when the pages are the demo web's offline pages, not the internet's."""
        ...

    async def fetch(self, url: str) -> FetchedPage:
        """The page at ``url``: HTML or text, at most the configured size."""
        ...


def html_to_text(html: str | bytes, url: str | None = None) -> tuple[str, str]:
    """The title and main text of an HTML page (trafilatura; all its text when no main part is found)."""
    meta = trafilatura.extract_metadata(html)
    title = (meta.title or "") if meta is not None else ""
    text = trafilatura.extract(html, url=url, include_comments=False, include_tables=True, favor_recall=True) or ""
    if not text.strip():
        text = trafilatura.html2txt(html) or ""
    if not text.strip():
        text = _all_text(html)
    return title.strip(), "\n".join(line.rstrip() for line in text.strip().splitlines())


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "noscript"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.parts.append(data.strip())


def _all_text(html: str | bytes) -> str:
    """Every piece of visible text, for fragments too small for trafilatura."""
    parser = _TextParser()
    parser.feed(html.decode("utf-8", "replace") if isinstance(html, bytes) else html)
    parser.close()
    return "\n".join(parser.parts)


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


class SearxngSearch:
    """The real search: a SearxNG-compatible JSON endpoint (``config.search_url``)."""

    demo_web = False

    def __init__(self, config: WebConfig) -> None:
        self.config = config

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        try:
            async with httpx2.AsyncClient(timeout=self.config.timeout, trust_env=False) as client:
                response = await client.get(
                    self.config.search_url,
                    params={"q": query, "format": "json"},
                    headers={"Accept": "application/json", "User-Agent": self.config.user_agent},
                )
            response.raise_for_status()
            data = response.json()
        except httpx2.TimeoutException as e:
            raise ToolError(
                f"The web search timed out ({e.__class__.__name__}); try again or answer without it."
            ) from e
        except (httpx2.HTTPError, ValueError) as e:
            raise ToolError(f"The web search failed: {e}.") from e
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise ToolError("The web search answered something that is not a list of results.")
        return [
            SearchHit(url=str(r.get("url", "")), title=str(r.get("title", "")), snippet=str(r.get("content", "")))
            for r in results
            if isinstance(r, dict) and r.get("url")
        ][:limit]


class WebSearch(Tool):
    """``web_search(query)``: results (url, title, snippet) and their count from a search backend."""

    def __init__(self, config: WebConfig, backend: SearchBackend | None = None) -> None:
        self.config = config
        self.backend: SearchBackend = backend if backend is not None else SearxngSearch(config)

    @property
    def spec(self) -> ToolSpec:
        description = (
            "Search the web. Returns results (url, title, snippet) and their count; read a page with web_fetch."
        )
        if self.backend.demo_web:
            description = (
                "Search the demo web: fictional pages shipped with the assistant, offline (not the internet). "
                "Returns results (url, title, snippet) and their count; read a page with web_fetch."
            )
        return ToolSpec(
            name="web_search",
            description=description,
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to search for."}},
                "required": ["query"],
            },
        )

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        query = str(args.get("query", "")).strip()
        if not query:
            raise ToolError("web_search needs a non-empty 'query'.")
        found = await self.backend.search(query, self.config.results)
        hits = [{"url": h.url, "title": h.title, "snippet": h.snippet[:400]} for h in found[: self.config.results]]
        payload: dict[str, object] = {"query": query, "count": len(hits), "results": hits}
        demo = self.backend.demo_web
        if demo:
            payload["demo_web"] = DEMO_WEB_NOTICE
        action = Action(tool="web_search", kind="search", label=query, count=len(hits), demo_web=demo)
        return ToolOutcome(_dump(payload), action)


class GuardedFetcher:
    """The real fetcher: httpx through the address guard, redirects followed one hop at a time, each checked."""

    demo_web = False

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self.guard = AddressGuard(config.allowed_hosts, config.resolve)

    async def fetch(self, url: str) -> FetchedPage:
        final_url, content_type, body = await self._get(url)
        return FetchedPage(url=final_url, content_type=content_type, body=body)

    def _check_url(self, url: str) -> httpx2.URL:
        try:
            parsed = httpx2.URL(url)
        except (httpx2.InvalidURL, ValueError) as e:
            raise ToolError(f"'{url}' is not a valid address.") from e
        if parsed.scheme not in ("http", "https"):
            raise ToolError(f"web_fetch only reads http and https addresses, not '{parsed.scheme}:'.")
        if not parsed.host:
            raise ToolError(f"'{url}' has no host.")
        return parsed

    async def _get(self, url: str) -> tuple[str, str, bytes]:
        headers = {
            "User-Agent": self.config.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        }
        async with httpx2.AsyncClient(
            transport=GuardedTransport(self.guard),
            timeout=self.config.timeout,
            follow_redirects=False,
            trust_env=False,
            headers=headers,
        ) as client:
            current = self._check_url(url)
            for _hop in range(self.config.max_redirects + 1):
                try:
                    async with client.stream("GET", current) as response:
                        if response.is_redirect:
                            location = response.headers.get("location", "")
                            current = self._check_url(str(current.join(location)))
                            continue
                        if response.status_code >= 400:
                            raise ToolError(f"{current} answered HTTP {response.status_code}.")
                        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                        if content_type and not content_type.startswith(HTML_TYPES + TEXT_TYPES):
                            raise ToolError(f"{current} is {content_type}; web_fetch reads HTML and text pages only.")
                        declared = response.headers.get("content-length", "")
                        if declared.isdigit() and int(declared) > self.config.max_bytes:
                            raise ToolError(self._too_large(current))
                        body = bytearray()
                        async for chunk in response.aiter_bytes():
                            body += chunk
                            if len(body) > self.config.max_bytes:
                                raise ToolError(self._too_large(current))
                        return str(current), content_type or "text/html", bytes(body)
                except BlockedAddress as e:
                    raise OutOfScope(f"Refused: {current} — {e}. web_fetch only reads public web pages.") from e
                except httpx2.TimeoutException as e:
                    raise ToolError(f"Reading {current} timed out.") from e
                except httpx2.HTTPError as e:
                    raise ToolError(f"Could not read {current}: {e}.") from e
        raise ToolError(f"{url} redirects more than {self.config.max_redirects} times; it was abandoned.")

    def _too_large(self, url: httpx2.URL) -> str:
        return f"{url} is larger than {self.config.max_bytes // (1024 * 1024) or 1} MB; it was not read."


class WebFetch(Tool):
    """``web_fetch(url)``: the main text of one page read by a fetcher (the real one: public pages only)."""

    def __init__(self, config: WebConfig, fetcher: Fetcher | None = None) -> None:
        self.config = config
        self.fetcher: Fetcher = fetcher if fetcher is not None else GuardedFetcher(config)

    @property
    def spec(self) -> ToolSpec:
        description = (
            "Read one web page (http or https) and get its title and main text. "
            f"Pages are cut at {self.config.max_chars} characters; private and local addresses are refused."
        )
        if self.fetcher.demo_web:
            description = (
                "Read one page of the demo web (fictional pages shipped with the assistant, offline; not the "
                f"internet) and get its title and main text. Pages are cut at {self.config.max_chars} characters; "
                "an address outside the demo web is refused."
            )
        return ToolSpec(
            name="web_fetch",
            description=description,
            parameters={
                "type": "object",
                "properties": {"url": {"type": "string", "description": "The page's address, http:// or https://."}},
                "required": ["url"],
            },
        )

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        url = str(args.get("url", "")).strip()
        if not url:
            raise ToolError("web_fetch needs a 'url'.")
        try:
            async with asyncio.timeout(self.config.timeout * 2):
                page = await self.fetcher.fetch(url)
        except TimeoutError as e:
            raise ToolError(f"Reading {url} took too long; it was abandoned.") from e
        final_url = page.url
        title, text = await asyncio.to_thread(self._extract, final_url, page.content_type, page.body)
        truncated = len(text) > self.config.max_chars
        host = urlsplit(final_url).hostname or ""
        payload: dict[str, object] = {"url": final_url, "title": title, "text": text[: self.config.max_chars]}
        if final_url != url:
            payload["requested_url"] = url
        if truncated:
            payload["truncated"] = True
        demo = self.fetcher.demo_web
        if demo:
            payload["demo_web"] = DEMO_WEB_NOTICE
        source = Source(id=final_url, title=title or final_url, kind="page", where=host, demo_web=demo)
        action = Action(tool="web_fetch", kind="fetch", label=final_url, demo_web=demo)
        return ToolOutcome(_dump(payload), action, (source,))

    def _extract(self, url: str, content_type: str, body: bytes) -> tuple[str, str]:
        if content_type.startswith(HTML_TYPES):
            return html_to_text(body, url)
        return "", body.decode("utf-8", "replace")


def web_tools(config: WebConfig, search: SearchBackend | None = None, fetcher: Fetcher | None = None) -> ToolFactory:
    """A factory giving ``web_search`` and ``web_fetch`` to scopes with ``web``.

    With no backend given, the real ones as ``config`` says: SearxNG when ``search_url`` is set, the guarded
    fetcher when ``fetch`` is. A backend given (the demo web's) is used whatever ``config`` says of the real ones.
    """

    def build(scope: Scope) -> list[Tool]:
        if not scope.web:
            return []
        tools: list[Tool] = []
        if search is not None or config.search_url:
            tools.append(WebSearch(config, search))
        if fetcher is not None or config.fetch:
            tools.append(WebFetch(config, fetcher))
        return tools

    return build
