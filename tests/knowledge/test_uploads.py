"""Uploading documents in the app: each format, limits, bombs, corrupt files, all or nothing, delete, organisations.

An upload answers at once with its documents processing; their text is extracted off the request, in a
child process with limits. Non-transactional tests extract what is pending in their own transaction
(``extract_pending``: the real child, without the pool's thread); transactional ones use the pool.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import Settings

from assistant.knowledge.backend import OrgKnowledge
from assistant.knowledge.fulltext import search
from assistant.knowledge.models import Document
from tests.knowledge.knowledge_support import (
    SECRET,
    docx_bomb,
    extract_pending,
    files_under,
    make_docx,
    make_pdf,
    pdf_bomb,
    two_orgs,
    wait_processed,
)
from tests.refusing import refused_inserts

pytestmark = pytest.mark.django_db


def upload(client: Client, slug: str, *files: tuple[str, bytes]) -> Any:
    return client.post(
        reverse("kb_base", args=[slug]), {"files": [SimpleUploadedFile(name, data) for name, data in files]}
    )


def readable(org_id: int, doc: Document) -> bool:
    """Whether the agents' kb_read would see the document."""
    return doc.public_id in async_to_sync(OrgKnowledge(org_id).read)([doc.public_id])


HTML = b"""<!doctype html><html><head><title>Gearbox notice</title></head><body>
<nav>Home | About</nav><article><h1>Gearbox notice</h1>
<p>The gearbox of turbine T7 was replaced in March after an oil leak was found during inspection.</p>
<p>The supplier covered the cost under warranty; the turbine was back online within nine days.</p>
</article><footer>Copyright</footer></body></html>"""


@pytest.mark.parametrize(
    ("name", "data", "title", "word"),
    [
        ("notes.txt", "Réunion : le quokka est arrivé.".encode(), "notes", "quokka"),
        ("readme.md", b"# Procedure\n\nCheck the **anemometer** every week.", "readme", "anemometer"),
        (
            "report.pdf",
            make_pdf("Inspection of the nacelle bearings", "Nacelle inspection"),
            "Nacelle inspection",
            "nacelle",
        ),
        ("minutes.docx", make_docx(["Decision: order two spare rotors."], "Board minutes"), "Board minutes", "rotors"),
        ("notice.html", HTML, "Gearbox notice", "warranty"),
    ],
)
def test_each_format_is_extracted_and_searchable_once_ready(
    media: Path, name: str, data: bytes, title: str, word: str
) -> None:
    a, _ = two_orgs()
    response = upload(a.client(), "factures", (name, data))
    assert response.status_code == 302
    doc = Document.objects.get(knowledge_base=a.kb, filename=name)
    assert doc.status == Document.PROCESSING and doc.size == len(data)
    assert Path(doc.file.path).read_bytes() == data and Path(doc.file.path).is_relative_to(media)
    assert search(a.org.pk, "factures", word, 8) == ([], 0) and not readable(a.org.pk, doc)
    extract_pending()
    doc.refresh_from_db()
    assert doc.status == Document.READY and doc.title == title and doc.failure == ""
    hits, total = search(a.org.pk, "factures", word, 8)
    assert total == 1 and hits[0].id == doc.public_id and readable(a.org.pk, doc)


def test_html_keeps_the_article_not_the_navigation(media: Path) -> None:
    a, _ = two_orgs()
    upload(a.client(), "factures", ("notice.html", HTML))
    extract_pending()
    text = Document.objects.get(filename="notice.html").text
    assert "oil leak" in text and "Home | About" not in text


@pytest.mark.django_db(transaction=True)
def test_an_upload_answers_at_once_and_the_pool_makes_it_ready(media: Path) -> None:
    a, _ = two_orgs()
    client = a.client()
    files = [
        ("notes.txt", b"the quokka report"),
        ("readme.md", b"# Wombat\n\nprocedure"),
        ("report.pdf", make_pdf("Inspection of the nacelle bearings")),
        ("minutes.docx", make_docx(["Decision: order two spare rotors."])),
    ]
    response = upload(client, "factures", *files)
    assert response.status_code == 302
    docs = list(Document.objects.filter(filename__in=[n for n, _ in files]))
    assert len(docs) == 4 and {d.status for d in docs} <= {Document.PROCESSING, Document.READY}
    docs = wait_processed(*(d.pk for d in docs))
    assert all(d.status == Document.READY for d in docs), [(d.filename, d.failure) for d in docs]
    for word, name in [
        ("quokka", "notes.txt"),
        ("wombat", "readme.md"),
        ("nacelle", "report.pdf"),
        ("rotors", "minutes.docx"),
    ]:
        hits, total = search(a.org.pk, "factures", word, 8)
        assert total == 1 and hits[0].title == Path(name).stem
    fragment = client.get(reverse("kb_documents", args=["factures"])).content.decode()
    assert "every 2s" not in fragment and fragment.count("Ready") >= 4


@pytest.mark.timeout(90)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("name", "bomb", "word"), [("bomb.pdf", pdf_bomb, "bomb"), ("bomb.docx", docx_bomb, "turbine")]
)
def test_a_bomb_answers_at_once_and_fails_by_the_limit(media: Path, name: str, bomb: Any, word: str) -> None:
    """3 pages sharing a 70 MB content stream; a .docx whose XML expands to 190 MB: both small on disk."""
    data = bomb()
    assert len(data) < 1_000_000
    a, _ = two_orgs()
    client = a.client()
    response = upload(client, "factures", (name, data))
    assert response.status_code == 302
    doc = Document.objects.get(filename=name)
    # The request did not extract anything: the document is still being processed when the answer arrives.
    assert doc.status == Document.PROCESSING and doc.text == ""
    (doc,) = wait_processed(doc.pk)
    assert (doc.status, doc.failure, doc.failure_params) == (Document.FAILED, "expanded", {"limit_mb": 50})
    assert doc.text == ""
    assert doc.public_id not in {h.id for h in search(a.org.pk, "factures", word, 8)[0]}
    assert not readable(a.org.pk, doc)
    page = client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert "Failed: too large when expanded: more than 50 MB of data." in page and "every 2s" not in page


@pytest.mark.parametrize(
    ("name", "data", "failure", "params", "message"),
    [
        ("broken.pdf", make_pdf("Some text")[:180], "corrupt", {"kind": "pdf"}, "could not be read as a PDF"),
        ("broken.docx", b"PK\x03\x04 this is not a zip archive", "corrupt", {"kind": "docx"}, "as a Word document"),
        ("binary.txt", b"\x00\x01\x02 ELF", "not_text", {}, "it is not a text file"),
        ("empty.pdf", make_pdf(""), "no_text", {}, "no text could be found in it"),
    ],
)
def test_a_corrupt_upload_ends_failed_with_its_reason(
    media: Path, name: str, data: bytes, failure: str, params: dict[str, Any], message: str
) -> None:
    a, _ = two_orgs()
    client = a.client()
    assert upload(client, "factures", (name, data)).status_code == 302
    extract_pending()
    doc = Document.objects.get(filename=name)
    assert (doc.status, doc.failure, doc.failure_params) == (Document.FAILED, failure, params)
    assert message in client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert not readable(a.org.pk, doc)


@pytest.mark.parametrize(
    ("overrides", "name", "data", "failure", "params"),
    [
        ({"KB_EXTRACT_MAX_PAGES": 2}, "bomb.pdf", lambda: pdf_bomb(1), "too_many_pages", {"pages": 3, "limit": 2}),
        ({"KB_EXTRACT_MAX_TEXT_CHARS": 10}, "long.txt", lambda: b"quokka " * 10, "text_too_long", {"limit": 10}),
        ({"KB_EXTRACT_MAX_EXPANDED_MB": 0.5}, "b.docx", lambda: docx_bomb(1), "expanded", {"limit_mb": 0.5}),
        # Past the decoding cap, the CPU-time limit ends a child that keeps parsing.
        (
            {"KB_EXTRACT_MAX_EXPANDED_MB": 1000, "KB_EXTRACT_CPU_SECONDS": 1},
            "bomb.pdf",
            pdf_bomb,
            "cpu",
            {"seconds": 1},
        ),
        ({"KB_EXTRACT_WALL_SECONDS": 0.001}, "notes.txt", lambda: b"quokka", "timeout", {"seconds": 0.001}),
        ({"KB_EXTRACT_MEMORY_MB": 20}, "minutes.docx", lambda: make_docx(["rotors"]), "memory", {"limit_mb": 20}),
    ],
)
def test_each_limit_is_a_setting(
    media: Path,
    settings: Settings,
    overrides: dict[str, Any],
    name: str,
    data: Any,
    failure: str,
    params: dict[str, Any],
) -> None:
    for key, value in overrides.items():
        setattr(settings, key, value)
    a, _ = two_orgs()
    assert upload(a.client(), "factures", (name, data())).status_code == 302
    extract_pending()
    doc = Document.objects.get(filename=name)
    assert (doc.status, doc.failure, doc.failure_params) == (Document.FAILED, failure, params)


def test_the_celery_task_reads_the_file_through_the_storage(
    media: Path, settings: Settings, django_capture_on_commit_callbacks: Any
) -> None:
    """Scaled out, the worker has no local path: an in-memory storage stands for an object store."""
    from assistant.workers.celery import app

    settings.RUNS_EXECUTOR = "celery"
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
    a, _ = two_orgs()
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            assert upload(a.client(), "factures", ("notes.txt", b"the numbat report")).status_code == 302
    finally:
        app.conf.task_always_eager = False
    doc = Document.objects.get(filename="notes.txt")
    assert doc.status == Document.READY and files_under(media) == []
    assert search(a.org.pk, "factures", "numbat", 8)[0][0].id == doc.public_id


def test_a_document_left_processing_by_a_stopped_server_is_failed(media: Path, settings: Settings) -> None:
    a, _ = two_orgs()
    left = Document.objects.create(knowledge_base=a.kb, title="left", text="", status=Document.PROCESSING)
    call_command("recover_runs")  # `make run` calls it before serving: the embedded pool died with the server
    left.refresh_from_db()
    assert (left.status, left.failure) == (Document.FAILED, "interrupted")
    # Scaled out, only what processed for longer than KB_EXTRACT_STALE_SECONDS; the list checks too.
    settings.RUNS_EXECUTOR = "celery"
    old = Document.objects.create(knowledge_base=a.kb, title="old", text="", status=Document.PROCESSING)
    fresh = Document.objects.create(knowledge_base=a.kb, title="fresh", text="", status=Document.PROCESSING)
    Document.objects.filter(pk=old.pk).update(created=timezone.now() - timedelta(seconds=1000))
    page = a.client().get(reverse("kb_base", args=["factures"])).content.decode()
    assert "the server stopped while it was being read" in page
    # While one is processing, the list polls its own fragment (htmx, no script of ours).
    fragment = reverse("kb_documents", args=["factures"])
    assert f'hx-get="{fragment}" hx-trigger="every 2s"' in page and "Processing…" in page
    assert 'hx-trigger="every 2s"' in a.client().get(fragment).content.decode()
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert (old.status, old.failure, fresh.status) == (Document.FAILED, "interrupted", Document.PROCESSING)


def test_an_oversized_upload_is_refused_and_leaves_nothing(media: Path, settings: Settings) -> None:
    settings.KB_MAX_UPLOAD_MB = 0.01
    a, _ = two_orgs()
    before = Document.objects.count()
    response = upload(a.client(), "factures", ("big.txt", b"turbine " * 4000))
    assert response.status_code == 422
    assert "big.txt is too large" in response.content.decode()
    assert "0.01 MB" in response.content.decode()
    assert Document.objects.count() == before and files_under(media) == []


def test_an_unsupported_upload_is_refused_and_leaves_nothing(media: Path) -> None:
    a, _ = two_orgs()
    before = Document.objects.count()
    response = upload(a.client(), "factures", ("tool.exe", b"MZ"))
    assert response.status_code == 422
    assert "tool.exe: this type of file is not supported" in response.content.decode()
    assert Document.objects.count() == before and files_under(media) == []


def test_of_several_files_the_good_ones_are_added_and_each_refused_one_is_named_with_why(media: Path) -> None:
    a, _ = two_orgs()
    before = Document.objects.count()
    client = a.client()
    response = upload(client, "factures", ("good.txt", b"platypus"), ("bad.exe", b"MZ"), ("also.md", b"echidna"))
    assert response.status_code == 302
    assert Document.objects.count() == before + 2 and len(files_under(media)) == 2
    page = client.get(response["Location"]).content.decode()
    assert "2 documents added" in page and "Not added: bad.exe: this type of file is not supported" in page
    extract_pending()
    assert search(a.org.pk, "factures", "platypus", 8)[1] == 1
    # None good: refused in place, each named, nothing saved.
    response = upload(client, "factures", ("bad.exe", b"MZ"), ("worse.bin", b"\x00"))
    assert response.status_code == 422
    assert "bad.exe: this type" in response.content.decode() and "worse.bin: this type" in response.content.decode()
    assert Document.objects.count() == before + 2 and len(files_under(media)) == 2


def test_a_database_failure_removes_the_files_already_written(media: Path) -> None:
    a, _ = two_orgs()
    before = Document.objects.count()
    client = a.client()
    client.raise_request_exception = False
    # The second file's row is refused by the database itself (as a full disk would), after both files are written.
    with refused_inserts(Document, "disk full", when="NEW.filename = 'two.txt'"):
        response = client.post(
            reverse("kb_base", args=["factures"]),
            {"files": [SimpleUploadedFile("one.txt", b"first"), SimpleUploadedFile("two.txt", b"second")]},
        )
    assert response.status_code == 500
    assert Document.objects.count() == before and files_under(media) == []


def test_delete_removes_the_row_its_file_and_its_index_entry(
    media: Path, django_capture_on_commit_callbacks: Any
) -> None:
    a, _ = two_orgs()
    client = a.admin_client()
    upload(client, "factures", ("notes.txt", b"the wallaby report"))
    extract_pending()
    doc = Document.objects.get(filename="notes.txt")
    path = Path(doc.file.path)
    assert path.exists() and search(a.org.pk, "factures", "wallaby", 8)[1] == 1
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("kb_delete", args=["factures", doc.pk]))
    assert response.status_code == 302
    assert not Document.objects.filter(pk=doc.pk).exists() and not path.exists()
    assert search(a.org.pk, "factures", "wallaby", 8) == ([], 0)


@pytest.mark.django_db(transaction=True)
def test_delete_through_htmx_answers_the_documents_fragment(media: Path) -> None:
    a, _ = two_orgs()
    client = a.admin_client()
    upload(client, "factures", ("notes.txt", b"the wallaby report"))
    (doc,) = wait_processed(Document.objects.get(filename="notes.txt").pk)
    path = Path(doc.file.path)
    assert path.exists()
    response = client.post(reverse("kb_delete", args=["factures", doc.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'id="documents"' in response.content.decode()
    assert not Document.objects.filter(pk=doc.pk).exists() and not path.exists()


def test_pages_list_bases_and_documents() -> None:
    a, _ = two_orgs()
    client = a.client()
    page = client.get(reverse("kb_bases")).content.decode()
    assert "Factures" in page and "4 documents" in page
    page = client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert all(d.title in page for d in a.docs)
    assert 'enctype="multipart/form-data"' in page and "csrfmiddlewaretoken" in page


# Another organisation's bases and documents do not exist for this user.


def test_the_same_slug_shows_only_the_users_own_base() -> None:
    a, b = two_orgs()
    page = b.client().get(reverse("kb_base", args=["factures"])).content.decode()
    assert "Zorglub merger" in page and not any(d.title in page for d in a.docs)
    page = a.client().get(reverse("kb_bases")).content.decode()
    assert "Zorglub" not in page and SECRET not in page


def test_another_organisations_base_is_404_for_list_and_upload(media: Path) -> None:
    a, b = two_orgs()
    b.kb.slug = "secrets"
    b.kb.save()
    client = a.client()
    assert client.get(reverse("kb_base", args=["secrets"])).status_code == 404
    assert client.get(reverse("kb_documents", args=["secrets"])).status_code == 404
    assert upload(client, "secrets", ("x.txt", b"intrusion")).status_code == 404
    assert not Document.objects.filter(text="intrusion").exists() and files_under(media) == []


def test_another_organisations_document_cannot_be_deleted() -> None:
    a, b = two_orgs()
    target = b.docs[0]
    # Through the user's own base slug, and through the other base's slug: 404 both ways, for admins and members.
    for client in (a.admin_client(), a.client()):
        assert client.post(reverse("kb_delete", args=["factures", target.pk])).status_code == 404
    b.kb.slug = "secrets"
    b.kb.save()
    for client in (a.admin_client(), a.client()):
        assert client.post(reverse("kb_delete", args=["secrets", target.pk])).status_code == 404
    assert Document.objects.filter(pk=target.pk).exists()


def test_a_document_of_another_base_of_the_same_organisation_is_not_deleted_through_this_one() -> None:
    a, _ = two_orgs()
    from assistant.knowledge.models import KnowledgeBase

    other = KnowledgeBase.objects.create(organisation=a.org, slug="contrats", name="Contrats")
    doc = Document.objects.create(knowledge_base=other, title="C", text="c")
    assert a.admin_client().post(reverse("kb_delete", args=["factures", doc.pk])).status_code == 404
    assert Document.objects.filter(pk=doc.pk).exists()


def test_login_csrf_and_membership_are_required(media: Path) -> None:
    a, _ = two_orgs()
    anonymous = Client()
    response = anonymous.get(reverse("kb_bases"))
    assert response.status_code == 302 and reverse("login") in response["Location"]
    assert anonymous.post(reverse("kb_delete", args=["factures", a.docs[0].pk])).status_code == 302
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(a.user)
    assert strict.post(reverse("kb_delete", args=["factures", a.docs[0].pk])).status_code == 403
    response = strict.post(reverse("kb_base", args=["factures"]), {"files": [SimpleUploadedFile("x.txt", b"csrf")]})
    assert response.status_code == 403 and not Document.objects.filter(text="csrf").exists()
    from django.contrib.auth import get_user_model

    loner = get_user_model().objects.create_user(username="loner", password=None)
    client = Client()
    client.force_login(loner)
    assert client.get(reverse("kb_bases")).status_code == 404
    assert client.get(reverse("kb_base", args=["factures"])).status_code == 404
    assert Document.objects.filter(pk=a.docs[0].pk).exists()


def test_pages_and_errors_speak_french(media: Path, settings: Settings) -> None:
    settings.KB_MAX_UPLOAD_MB = 0.01
    a, _ = two_orgs()
    client = a.client()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "fr"
    page = client.get(reverse("kb_bases")).content.decode()
    assert "Bases de connaissances" in page and "4 documents" in page
    response = upload(client, "factures", ("big.txt", b"x" * 20_000), ("b.pdf", b"%PDF-1.4 broken"))
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "est en cours de lecture" in page and "Non ajouté : big.txt est trop volumineux" in page
    extract_pending()
    page = client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert "Échec : il n’a pas pu être lu comme un PDF" in page


def test_a_nul_in_a_title_is_dropped() -> None:
    from assistant.knowledge.extract import extract

    # A PDF's title in UTF-16 (its byte-order mark first) holding a U+0000 between two words.
    utf16 = "\xfe\xff" + "".join(f"\x00{c}" for c in "Nacelle") + "\x00\x00" + "".join(f"\x00{c}" for c in "inspection")
    extracted = extract("memo.pdf", make_pdf("Bearing inspection notes", utf16))
    assert extracted.title == "Nacelle inspection" and "\x00" not in extracted.title
