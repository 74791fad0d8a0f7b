"""The server's request bodies (assistant/server): never parsed by Twisted, refused past the upload limits as they
arrive, and an upload refused or cut short leaves no document and no file.

The limit is lowered to 1 MB a file and 2 files an upload (a body of at most about 2.1 MB), so that the bodies
stay small. The server is the real one (``manage.py runserver``, Daphne); the requests go through raw sockets
where the test needs to send part of a body, or a body Twisted would have parsed.
"""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from assistant.server.server import PartSizes, boundary_of
from tests.live_server import DEMO_SERVER, start_server

pytestmark = pytest.mark.slow

MB = 1024 * 1024
UPLOAD = "/kb/factures/"


@dataclass
class Served:
    url: str
    port: int
    folder: Path

    def documents(self) -> int:
        with sqlite3.connect(self.folder / "db.sqlite3") as db:
            return int(db.execute("SELECT COUNT(*) FROM knowledge_document").fetchone()[0])

    def stored_files(self) -> list[Path]:
        return [
            p for p in (self.folder / "media").rglob("*") if p.is_file() and "/kb/" in str(p) and "tables" not in str(p)
        ]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("bodies")
    env = {"KB_MAX_UPLOAD_MB": "1", "KB_MAX_UPLOAD_FILES": "2"}
    with start_server(DEMO_SERVER, folder, pace="0", latency="0", env=env) as server:
        server.wait_until_up(timeout=180)  # migrate and load_demo first, on a shared machine
        yield Served(server.url, server.port, folder)


@pytest.fixture
def clients() -> Iterator[list[httpx2.Client]]:
    made: list[httpx2.Client] = []
    yield made
    for client in made:
        client.close()


def signed_in(served: Served, clients: list[httpx2.Client], language: str = "en") -> httpx2.Client:
    client = httpx2.Client(base_url=served.url, timeout=60, headers={"Accept-Language": language})
    client.get("/login/")
    signed = client.post(
        "/login/",
        data={"username": "demo", "password": "demo-password", "csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": f"{served.url}/login/"},
    )
    assert signed.status_code == 302
    clients.append(client)
    return client


def multipart(boundary: str, files: list[tuple[str, bytes]], csrf: str) -> bytes:
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n{csrf}\r\n'.encode()]
    for name, data in files:
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
        parts.append(head.encode() + b"Content-Type: text/plain\r\n\r\n" + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


def raw_headers(served: Served, client: httpx2.Client, length: int, boundary: str, language: str = "en") -> bytes:
    cookies = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    return (
        f"POST {UPLOAD} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nCookie: {cookies}\r\n"
        f"Referer: {served.url}{UPLOAD}\r\nHX-Request: true\r\nAccept-Language: {language}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def answer(sock: socket.socket) -> bytes:
    """The response's head and its first fragment (the form's error, one paragraph)."""
    sock.settimeout(30)
    out = b""
    while b"</p>" not in out and (chunk := sock.recv(65536)):
        out += chunk
    return out


def test_part_sizes_are_counted_across_chunks() -> None:
    body = multipart("b0undary", [("a.txt", b"x" * 5000), ("b.txt", b"y" * 300)], "token")
    whole = PartSizes(b"b0undary").feed(body)
    for size in (1, 7, 9, 64, 4096):
        parts = PartSizes(b"b0undary")
        largest = max(parts.feed(body[i : i + size]) for i in range(0, len(body), size))
        assert largest == whole
    assert 5000 < whole < 5200
    assert boundary_of(b'multipart/form-data; boundary="a b"') == b"a b"
    assert boundary_of(b"application/x-www-form-urlencoded") is None


def test_an_upload_within_the_limits_is_added(served: Served, clients: list[httpx2.Client]) -> None:
    client = signed_in(served, clients)
    before = served.documents()
    sent = client.post(
        UPLOAD,
        files=[("files", ("one.txt", b"turbine " * 60_000)), ("files", ("two.txt", b"okapi " * 1000))],
        data={"csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": f"{served.url}{UPLOAD}"},
    )
    assert sent.status_code == 302
    assert served.documents() == before + 2


@pytest.mark.parametrize(
    ("language", "words"), [("en", "Nothing was added: send at most 2 files"), ("fr", "Rien n’a été ajouté")]
)
def test_a_file_over_the_limit_is_refused_as_it_arrives(
    served: Served, clients: list[httpx2.Client], language: str, words: str
) -> None:
    """The second file is over 1 MB: refused in the reader's language, at the top of the form; nothing is kept."""
    client = signed_in(served, clients, language)
    before, files = served.documents(), served.stored_files()
    sent = client.post(
        UPLOAD,
        files=[("files", ("small.txt", b"fine")), ("files", ("big.txt", b"z" * (MB + 100_000)))],
        data={"csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": f"{served.url}{UPLOAD}", "HX-Request": "true"},
    )
    assert sent.status_code == 413
    assert words in sent.text and 'role="alert"' in sent.text
    assert sent.headers["HX-Retarget"] == "this"
    assert served.documents() == before and served.stored_files() == files


def test_too_many_files_are_refused(served: Served, clients: list[httpx2.Client]) -> None:
    client = signed_in(served, clients, "fr")
    before = served.documents()
    sent = client.post(
        UPLOAD,
        files=[("files", (f"{n}.txt", b"small")) for n in range(3)],
        data={"csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": f"{served.url}{UPLOAD}"},
    )
    assert sent.status_code == 413 and "Rien n’a été ajouté" in sent.text
    assert served.documents() == before


def test_a_body_declared_over_the_limit_is_not_read_whole(served: Served, clients: list[httpx2.Client]) -> None:
    """Content-Length over the limit: its bytes are dropped as they come, and past twice the limit the server
    closes the connection; the client cannot send it all. The server goes on serving."""
    client = signed_in(served, clients)
    before = served.documents()
    declared = 40 * MB
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(raw_headers(served, client, declared, "xyz"))
        sent, closed = 0, False
        block = b"--xyz\r\n" + b"a" * 65_536
        try:
            while sent < declared:
                sock.sendall(block)
                sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
    assert closed and sent < declared / 2
    assert client.get(UPLOAD).status_code == 200
    assert served.documents() == before


@pytest.mark.parametrize(("language", "words"), [("en", "Nothing was added"), ("fr", "Rien n’a été ajouté")])
def test_a_body_declared_a_little_over_the_limit_gets_the_forms_refusal(
    served: Served, clients: list[httpx2.Client], language: str, words: str
) -> None:
    """Its Content-Length is over the limit: refused from its headers, its bytes dropped as they come (under twice the
    limit: read to its end, then answered), the form's error in the reader's language, a fragment for htmx at the
    top of the form; nothing is kept."""
    client = signed_in(served, clients, language)
    before, files = served.documents(), served.stored_files()
    body = multipart("xyz", [("a.txt", b"a" * 900_000), ("b.txt", b"b" * 900_000)], client.cookies["csrftoken"])
    body += b"c" * (3 * MB - len(body))  # over the whole body's limit (2 files of 1 MB and the form)
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(raw_headers(served, client, len(body), "xyz", language) + body)
        reply = answer(sock)
    head, _, fragment = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and b"hx-retarget: this" in head.lower()
    assert words in fragment.decode() and b'role="alert"' in fragment and b"<html" not in fragment
    assert served.documents() == before and served.stored_files() == files


def test_an_aborted_upload_leaves_nothing(served: Served, clients: list[httpx2.Client]) -> None:
    """The client sends half of a valid upload and goes: no document, no file; the server goes on serving."""
    client = signed_in(served, clients)
    before, files = served.documents(), served.stored_files()
    body = multipart("xyz", [("cut.txt", b"a" * 800_000)], client.cookies["csrftoken"])
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(raw_headers(served, client, len(body), "xyz") + body[: len(body) // 2])
    time.sleep(0.5)  # the server notices the connection lost (nothing to wait for: nothing must happen)
    assert client.get(UPLOAD).status_code == 200
    assert served.documents() == before and served.stored_files() == files


def test_a_client_cannot_claim_the_servers_refusal_header_is_absent(
    served: Served, clients: list[httpx2.Client]
) -> None:
    """A client's own Body-Refused header is dropped: its upload within the limits is added."""
    client = signed_in(served, clients)
    before = served.documents()
    sent = client.post(
        UPLOAD,
        files=[("files", ("own.txt", b"hello"))],
        data={"csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": f"{served.url}{UPLOAD}", "Body-Refused": "1"},
    )
    assert sent.status_code == 302 and served.documents() == before + 1


def test_twisted_leaves_the_body_to_django(served: Served, clients: list[httpx2.Client]) -> None:
    """A multipart body Twisted's own parser refuses (it answered a bare 400 and closed) reaches Django: the form
    it carries has no CSRF token, and the refusal is the form's notice, in the reader's language."""
    client = signed_in(served, clients, "fr")
    body = b"no boundary here at all"
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(raw_headers(served, client, len(body), "xyz", "fr") + body)
        reply = answer(sock)
    assert reply.startswith(b"HTTP/1.1 403")
    assert b'role="alert"' in reply and b"Rechargez la page" in reply
