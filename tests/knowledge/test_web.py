"""web_search against a local fake SearxNG, web_fetch against a local server: extraction, limits, and
no way to a private, loopback or link-local address, directly, through a redirect or through DNS."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from assistant.engine.errors import OutOfScope, ToolError
from assistant.engine.netguard import AddressGuard, BlockedAddress, allowed_ports, is_public_address
from assistant.engine.scope import Scope
from assistant.engine.web import WebConfig, WebFetch, WebSearch, web_tools
from tests.engine.engine_support import STOPPED_WITH_RUN

ARTICLE = b"""<!doctype html><html><head><title>Wind report</title></head><body>
<nav>Home | Products | Contact</nav>
<article><h1>Wind report</h1>
<p>Offshore wind capacity grew by eleven percent last year, led by new farms in the North Sea.</p>
<p>Analysts expect maintenance costs per turbine to fall as larger turbines come online.</p>
</article><footer>All rights reserved</footer></body></html>"""

SEARCH_RESULTS = {
    "query": "wind",
    "number_of_results": 2,
    "results": [
        {"url": "https://example.org/wind", "title": "Wind power", "content": "Wind power is growing.", "engine": "x"},
        {"url": "https://example.org/turbines", "title": "Turbines", "content": "How turbines work.", "engine": "y"},
        {"title": "no url: ignored"},
    ],
}


class Handler(BaseHTTPRequestHandler):
    hits: Counter[str] = Counter()
    queries: list[dict[str, list[str]]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send(self, status: int, body: bytes, content_type: str = "text/html; charset=utf-8", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        Handler.hits[url.path] += 1
        if url.path == "/page":
            self.send(200, ARTICLE)
        elif url.path == "/plain":
            self.send(200, "Plain text: été.".encode(), "text/plain; charset=utf-8")
        elif url.path == "/redirect":
            self.send(302, b"", Location=query["to"][0])
        elif url.path == "/chain":
            self.send(301, b"", Location="/redirect?to=/page")
        elif url.path == "/loop":
            self.send(302, b"", Location="/loop")
        elif url.path == "/big":
            self.send(200, b"x" * 5000)
        elif url.path == "/big-stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()  # no length: the body ends when the connection closes
            self.wfile.write(b"y" * 50_000)
            self.close_connection = True
        elif url.path == "/slow":
            time.sleep(3)
            self.send(200, ARTICLE)
        elif url.path == "/binary":
            self.send(200, b"\x7fELF", "application/octet-stream")
        elif url.path == "/search":
            Handler.queries.append(query)
            self.send(200, json.dumps(SEARCH_RESULTS).encode(), "application/json")
        elif url.path == "/search-broken":
            self.send(200, b"<html>not json</html>")
        else:
            self.send(404, b"not found")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def fetcher(server: str = "", **kwargs: object) -> WebFetch:
    """A web_fetch whose allow-list names the test server's host and port (an allowed host is on 80 and 443 only)."""
    allowed = frozenset({urlsplit(server).netloc}) if server else frozenset()
    options: dict[str, Any] = {"allowed_hosts": allowed, "timeout": 5.0}
    options.update(kwargs)
    return WebFetch(WebConfig(**options))


# web_fetch: what it reads ---------------------------------------------------------------------


async def test_fetch_reads_the_main_text_of_an_allowed_page(server: str) -> None:
    outcome = await fetcher(server).run({"url": f"{server}/page"})
    data = json.loads(outcome.content)
    assert data["title"] == "Wind report"
    assert "eleven percent" in data["text"] and "Home | Products" not in data["text"]
    assert outcome.sources[0].kind == "page" and outcome.sources[0].id == f"{server}/page"
    assert outcome.action is not None and outcome.action.kind == "fetch"


async def test_fetch_reads_text_and_follows_safe_redirects(server: str) -> None:
    data = json.loads((await fetcher(server).run({"url": f"{server}/plain"})).content)
    assert data["text"] == "Plain text: été."
    data = json.loads((await fetcher(server).run({"url": f"{server}/chain"})).content)
    assert data["url"] == f"{server}/page" and data["requested_url"] == f"{server}/chain"


@pytest.mark.parametrize(
    ("path", "options", "message"),
    [
        ("/big", {"max_bytes": 1000}, "larger than"),
        ("/big-stream", {"max_bytes": 1000}, "larger than"),
        ("/slow", {"timeout": 0.5}, "timed out|took too long"),
        ("/binary", {}, "application/octet-stream; web_fetch reads HTML and text pages only"),
        ("/loop", {"max_redirects": 3}, "redirects more than 3 times"),
        ("/missing", {}, "answered HTTP 404"),
    ],
)
async def test_fetch_limits(server: str, path: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        await fetcher(server, **options).run({"url": f"{server}{path}"})


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.org/x", "gopher://example.org/", "javascript:alert(1)", ""]
)
async def test_fetch_reads_only_http_and_https(url: str) -> None:
    with pytest.raises(ToolError):
        await fetcher().run({"url": url})


# web_fetch: no way to private addresses ---------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/page",
        "http://localhost:{port}/page",
        "http://[::1]:{port}/page",
        "http://[::ffff:127.0.0.1]:{port}/page",
        "http://0.0.0.0:{port}/page",
        "http://10.0.0.1/",
        "http://192.168.1.1/admin",
        "http://172.16.0.1/",
        "http://100.64.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://2130706433:{port}/page",  # 127.0.0.1 written as one number
    ],
)
async def test_private_addresses_are_refused_without_an_allowed_host(server: str, url: str) -> None:
    port = server.rsplit(":", 1)[1]
    before = Handler.hits["/page"]
    with pytest.raises(OutOfScope, match="private, loopback or link-local"):
        await fetcher(allowed_hosts=frozenset()).run({"url": url.format(port=port)})
    assert Handler.hits["/page"] == before, "the server was never reached"


@pytest.mark.parametrize(
    "target",
    [
        "http://localhost:{port}/page",  # loopback under another name than the allowed one
        "http://[::1]:{port}/page",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://192.168.0.10:8080/",
    ],
)
async def test_redirects_to_private_addresses_are_refused(server: str, target: str) -> None:
    port = server.rsplit(":", 1)[1]
    before = Handler.hits["/page"]
    with pytest.raises(OutOfScope, match=r"Refused: .* private, loopback or link-local"):
        await fetcher(server).run({"url": f"{server}/redirect?to={target.format(port=port)}"})
    assert Handler.hits["/page"] == before


async def test_every_resolved_address_is_checked() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return {"mixed.example": ["93.184.216.34", "10.0.0.5"], "rebound.example": ["::ffff:192.168.0.1"]}[host]

    for host in ("mixed.example", "rebound.example"):
        with pytest.raises(OutOfScope, match=f"{host} resolves to"):
            await fetcher(allowed_hosts=frozenset(), resolve=resolve).run({"url": f"http://{host}/"})


async def test_the_connection_goes_to_the_address_that_was_checked(server: str) -> None:
    # "pinned.example" does not exist in DNS: the page can only be reached through the guard's resolver.
    port = server.rsplit(":", 1)[1]

    async def resolve(host: str, port: int) -> list[str]:
        assert host == "pinned.example"
        return ["127.0.0.1"]

    tool = fetcher(allowed_hosts=frozenset({f"pinned.example:{port}"}), resolve=resolve)
    data = json.loads((await tool.run({"url": f"http://pinned.example:{port}/page"})).content)
    assert data["title"] == "Wind report"


async def test_environment_proxies_are_ignored(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://10.9.9.9:3128")
    data = json.loads((await fetcher(server).run({"url": f"{server}/page"})).content)
    assert data["title"] == "Wind report"


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.31.255.255", False),
        ("192.168.0.1", False),
        ("100.64.0.1", False),
        ("169.254.169.254", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("::ffff:10.0.0.1", False),
        ("2002:7f00:1::", False),  # 6to4 wrapping 127.0.0.1
        ("2002:a00:1::1", False),  # 6to4 wrapping 10.0.0.1
        ("2002:808:808::1", True),  # 6to4 wrapping 8.8.8.8
        ("64:ff9b::7f00:1", False),  # NAT64 (well-known prefix) wrapping 127.0.0.1
        ("64:ff9b::a00:1", False),  # ... 10.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # ... 169.254.169.254
        ("64:ff9b::808:808", True),  # ... 8.8.8.8
        ("64:ff9b:1::7f00:1", False),  # NAT64 (local-use prefix, /96) wrapping 127.0.0.1
        ("64:ff9b:1:7f00:0:100::", False),  # ... a /48 prefix wrapping 127.0.0.1
        ("::ffff:127.0.0.1", False),  # IPv4-mapped
        ("::ffff:8.8.8.8", True),
        ("::7f00:1", False),  # IPv4-compatible 127.0.0.1
        ("::a00:1", False),  # IPv4-compatible 10.0.0.1
        ("not-an-ip", False),
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(address) is public


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]:{port}/page",  # NAT64 of 127.0.0.1
        "http://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
        "http://[64:ff9b:1::7f00:1]:{port}/page",  # local-use NAT64 of 127.0.0.1
        "http://[2002:7f00:1::]:{port}/page",  # 6to4 of 127.0.0.1
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
        "http://[::7f00:1]:{port}/page",  # IPv4-compatible
    ],
)
async def test_addresses_carrying_a_private_ipv4_address_are_refused(server: str, url: str) -> None:
    port = server.rsplit(":", 1)[1]
    before = Handler.hits["/page"]
    with pytest.raises(OutOfScope, match="private, loopback or link-local"):
        await fetcher(server).run({"url": url.format(port=port)})
    assert Handler.hits["/page"] == before


async def test_an_allowed_host_is_allowed_on_ports_80_and_443_only() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["10.0.0.5"]

    guard = AddressGuard({"wiki.internal"}, resolve)
    assert await guard.addresses("wiki.internal", 443) == ["10.0.0.5"]
    assert await guard.addresses("wiki.internal", 80) == ["10.0.0.5"]
    for port in (22, 8080, 5432):
        with pytest.raises(BlockedAddress, match=r"10\.0\.0\.5, a private.*\(allowed on ports 80, 443 only\)"):
            await guard.addresses("wiki.internal", port)
    named = AddressGuard({"wiki.internal:8080", "[fd00::1]:22"}, resolve)
    assert await named.addresses("wiki.internal", 8080) == ["10.0.0.5"]
    assert await named.addresses("[fd00::1]", 22) == ["10.0.0.5"]
    with pytest.raises(BlockedAddress, match=r"allowed on port 8080 only"):
        await named.addresses("wiki.internal", 443)


async def test_an_allowed_host_on_another_port_is_refused(server: str) -> None:
    # The test server listens on a random port: "127.0.0.1" alone allows 80 and 443, not that port.
    port = server.rsplit(":", 1)[1]
    before = Handler.hits["/page"]
    for url in (f"{server}/page", "http://127.0.0.1:22/"):
        with pytest.raises(OutOfScope, match="private, loopback or link-local"):
            await fetcher(allowed_hosts=frozenset({"127.0.0.1"})).run({"url": url})
    assert Handler.hits["/page"] == before
    data = json.loads(
        (await fetcher(allowed_hosts=frozenset({f"127.0.0.1:{port}"})).run({"url": f"{server}/page"})).content
    )
    assert data["title"] == "Wind report"


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        (["wiki.internal"], {"wiki.internal": {80, 443}}),
        (["Wiki.Internal:8080", "wiki.internal"], {"wiki.internal": {80, 443, 8080}}),
        (["10.0.0.5:8443"], {"10.0.0.5": {8443}}),
        (["fd00::1"], {"fd00::1": {80, 443}}),
        (["[fd00::1]:8080"], {"fd00::1": {8080}}),
        (["[fd00::1]"], {"fd00::1": {80, 443}}),
    ],
)
def test_allow_list_entries(entries: list[str], expected: dict[str, set[int]]) -> None:
    assert allowed_ports(entries) == expected


@pytest.mark.parametrize(
    "entry", ["wiki.internal:http", "wiki.internal:0", "wiki.internal:70000", ":8080", "[fd00::1", "[fd00::1]x"]
)
def test_malformed_allow_list_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="allowed host"):
        WebConfig(allowed_hosts=frozenset({entry}))


# web_search ---------------------------------------------------------------------------------------


async def test_web_search_through_a_searxng_endpoint(server: str) -> None:
    outcome = await WebSearch(WebConfig(search_url=f"{server}/search")).run({"query": "offshore wind"})
    data = json.loads(outcome.content)
    assert data["count"] == 2
    assert [r["url"] for r in data["results"]] == ["https://example.org/wind", "https://example.org/turbines"]
    assert data["results"][0] == {
        "url": "https://example.org/wind",
        "title": "Wind power",
        "snippet": "Wind power is growing.",
    }
    assert Handler.queries[-1] == {"q": ["offshore wind"], "format": ["json"]}
    assert outcome.action is not None and outcome.action.label == "offshore wind" and outcome.action.count == 2


@pytest.mark.parametrize(
    ("url", "args", "message"),
    [
        ("{server}/search-broken", {"query": "x"}, "web search failed"),
        ("{server}/missing", {"query": "x"}, "web search failed"),
        ("http://127.0.0.1:9/search", {"query": "x"}, "web search failed"),
        ("{server}/search", {"query": "  "}, "non-empty 'query'"),
    ],
)
async def test_web_search_errors_go_back_to_the_model(
    server: str, url: str, args: dict[str, str], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        await WebSearch(WebConfig(search_url=url.format(server=server))).run(args)


def test_web_search_is_absent_without_an_endpoint() -> None:
    def names(config: WebConfig, scope: Scope) -> list[str]:
        return [t.spec.name for t in web_tools(config)(scope)]

    assert names(WebConfig(search_url="", fetch=True), Scope(web=True)) == ["web_fetch"]
    assert names(WebConfig(search_url="http://s/search", fetch=True), Scope(web=True)) == ["web_search", "web_fetch"]
    assert names(WebConfig(search_url="http://s/search", fetch=False), Scope(web=True)) == ["web_search"]
    assert names(WebConfig(search_url="http://s/search"), Scope(("factures",), code=True)) == []


# Stop ------------------------------------------------------------------------------------------


async def test_stop_aborts_a_page_read_in_flight(server: str) -> None:
    """Stop while web_fetch waits for a slow page: the read is aborted, the run ends stopped without another model
    call, and the step says the run's cause."""
    from assistant.engine.events import ToolResultEvent
    from tests.engine.engine_support import MAIN, call, harness, reply, scripted

    before = Handler.hits["/slow"]
    h = harness(
        {
            MAIN.id: scripted(
                reply(call("web_fetch", url=f"{server}/slow")),
                reply(text="Cette réponse ne doit jamais être produite."),
            )
        },
        factories=[web_tools(WebConfig(fetch=True, allowed_hosts=frozenset({urlsplit(server).netloc}), timeout=60))],
    )

    async def stop_once_requested() -> None:
        for _ in range(1500):
            if Handler.hits["/slow"] > before:
                h.ctx.cancel.cancel()
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the page was never requested")

    stopper = asyncio.create_task(stop_once_requested())
    outcome = await h.run(resources=("web",))
    await stopper
    assert outcome.status == "stopped" and len(h.main.requests) == 1
    [result] = h.of(ToolResultEvent)
    assert result.name == "web_fetch" and not result.ok and result.action is not None
    assert result.action.stopped == STOPPED_WITH_RUN
    assert result.action.started and not result.sources
