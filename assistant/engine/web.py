"""Web tools: ``web_search(query)`` through a SearxNG-compatible JSON endpoint, ``web_fetch(url)`` of one page.

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
from typing import Any
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


class WebSearch(Tool):
    """``web_search(query)``: results (url, title, snippet) and their count from a SearxNG-compatible endpoint."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="web_search",
            description="Search the web. Returns results (url, title, snippet) and their count; read a page with web_fetch.",
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
        hits = [
            {"url": str(r.get("url", "")), "title": str(r.get("title", "")), "snippet": str(r.get("content", ""))[:400]}
            for r in results
            if isinstance(r, dict) and r.get("url")
        ][: self.config.results]
        content = _dump({"query": query, "count": len(hits), "results": hits})
        return ToolOutcome(content, Action(tool="web_search", kind="search", label=query, count=len(hits)))


class WebFetch(Tool):
    """``web_fetch(url)``: the main text of one public page, redirects checked hop by hop."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self.guard = AddressGuard(config.allowed_hosts, config.resolve)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="web_fetch",
            description=(
                "Read one web page (http or https) and get its title and main text. "
                f"Pages are cut at {self.config.max_chars} characters; private and local addresses are refused."
            ),
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
                final_url, content_type, body = await self._get(url)
        except TimeoutError as e:
            raise ToolError(f"Reading {url} took too long; it was abandoned.") from e
        title, text = await asyncio.to_thread(self._extract, final_url, content_type, body)
        truncated = len(text) > self.config.max_chars
        host = urlsplit(final_url).hostname or ""
        payload: dict[str, object] = {"url": final_url, "title": title, "text": text[: self.config.max_chars]}
        if final_url != url:
            payload["requested_url"] = url
        if truncated:
            payload["truncated"] = True
        source = Source(id=final_url, title=title or final_url, kind="page", where=host)
        return ToolOutcome(_dump(payload), Action(tool="web_fetch", kind="fetch", label=final_url), (source,))

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

    def _extract(self, url: str, content_type: str, body: bytes) -> tuple[str, str]:
        if content_type.startswith(HTML_TYPES):
            return html_to_text(body, url)
        return "", body.decode("utf-8", "replace")


def web_tools(config: WebConfig) -> ToolFactory:
    """A factory giving ``web_search`` (when an endpoint is configured) and ``web_fetch`` to scopes with ``web``."""

    def build(scope: Scope) -> list[Tool]:
        if not scope.web:
            return []
        tools: list[Tool] = []
        if config.search_url:
            tools.append(WebSearch(config))
        if config.fetch:
            tools.append(WebFetch(config))
        return tools

    return build
