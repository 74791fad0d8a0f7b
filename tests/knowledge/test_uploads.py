"""Uploading documents in the app: each format, size limit, corrupt files, all or nothing, delete, organisations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from knowledge_support import SECRET, files_under, make_docx, make_pdf, two_orgs

from assistant.knowledge.fulltext import search
from assistant.knowledge.models import Document

pytestmark = pytest.mark.django_db


def upload(client: Client, slug: str, *files: tuple[str, bytes]) -> object:
    return client.post(
        reverse("kb_base", args=[slug]), {"files": [SimpleUploadedFile(name, data) for name, data in files]}
    )


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
def test_each_format_is_extracted_and_searchable(media: Path, name: str, data: bytes, title: str, word: str) -> None:
    a, _ = two_orgs()
    response = upload(a.client(), "factures", (name, data))
    assert response.status_code == 302  # type: ignore[attr-defined]
    doc = Document.objects.get(knowledge_base=a.kb, filename=name)
    assert doc.title == title and doc.size == len(data)
    assert Path(doc.file.path).read_bytes() == data and Path(doc.file.path).is_relative_to(media)
    hits, total = search(a.org.pk, "factures", word, 8)
    assert total == 1 and hits[0].id == doc.public_id


def test_html_keeps_the_article_not_the_navigation(media: Path) -> None:
    a, _ = two_orgs()
    upload(a.client(), "factures", ("notice.html", HTML))
    text = Document.objects.get(filename="notice.html").text
    assert "oil leak" in text and "Home | About" not in text


def test_an_oversized_upload_is_refused_and_leaves_nothing(media: Path, settings: object) -> None:
    settings.KB_MAX_UPLOAD_MB = 0.01  # type: ignore[attr-defined]
    a, _ = two_orgs()
    before = Document.objects.count()
    response = upload(a.client(), "factures", ("big.txt", b"turbine " * 4000))
    assert response.status_code == 422  # type: ignore[attr-defined]
    assert "big.txt is too large" in response.content.decode()  # type: ignore[attr-defined]
    assert "0.01 MB" in response.content.decode()  # type: ignore[attr-defined]
    assert Document.objects.count() == before and files_under(media) == []


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("broken.pdf", make_pdf("Some text")[:180], "broken.pdf could not be read as a PDF"),
        ("broken.docx", b"PK\x03\x04 this is not a zip archive", "broken.docx could not be read as a Word document"),
        ("binary.txt", b"\x00\x01\x02 ELF", "binary.txt is not a text file"),
        ("empty.pdf", make_pdf(""), "empty.pdf: no text could be found"),
        ("tool.exe", b"MZ", "tool.exe: this type of file is not supported"),
    ],
)
def test_a_corrupt_upload_is_refused_and_leaves_nothing(media: Path, name: str, data: bytes, message: str) -> None:
    a, _ = two_orgs()
    before = Document.objects.count()
    response = upload(a.client(), "factures", (name, data))
    assert response.status_code == 422  # type: ignore[attr-defined]
    assert message in response.content.decode()  # type: ignore[attr-defined]
    assert Document.objects.count() == before and files_under(media) == []


def test_several_files_are_added_together_or_not_at_all(media: Path) -> None:
    a, _ = two_orgs()
    before = Document.objects.count()
    response = upload(a.client(), "factures", ("good.txt", b"platypus"), ("bad.docx", b"PK\x03\x04 broken"))
    assert response.status_code == 422  # type: ignore[attr-defined]
    assert Document.objects.count() == before and files_under(media) == []
    assert search(a.org.pk, "factures", "platypus", 8) == ([], 0)
    response = upload(a.client(), "factures", ("good.txt", b"platypus"), ("also.md", b"echidna"))
    assert response.status_code == 302  # type: ignore[attr-defined]
    assert Document.objects.count() == before + 2 and len(files_under(media)) == 2


def test_a_database_failure_removes_the_files_already_written(media: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, _ = two_orgs()
    before = Document.objects.count()
    real_save = Document.save
    calls = {"n": 0}

    def failing_save(self: Document, *args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk full")
        real_save(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Document, "save", failing_save)
    client = a.client()
    client.raise_request_exception = False
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
    doc = Document.objects.get(filename="notes.txt")
    path = Path(doc.file.path)
    assert path.exists()
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
    doc = Document.objects.get(filename="notes.txt")
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
    assert upload(client, "secrets", ("x.txt", b"intrusion")).status_code == 404  # type: ignore[attr-defined]
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


def test_pages_and_errors_speak_french(media: Path, settings: object) -> None:
    settings.KB_MAX_UPLOAD_MB = 0.01  # type: ignore[attr-defined]
    a, _ = two_orgs()
    client = a.client()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "fr"  # type: ignore[attr-defined]
    page = client.get(reverse("kb_bases")).content.decode()
    assert "Bases de connaissances" in page and "4 documents" in page
    response = upload(client, "factures", ("big.txt", b"x" * 20_000), ("b.pdf", b"%PDF"))
    assert "big.txt est trop volumineux" in response.content.decode()  # type: ignore[attr-defined]
    response = upload(client, "factures", ("b.pdf", b"%PDF-1.4 broken"))
    assert "b.pdf n’a pas pu être lu comme un PDF" in response.content.decode()  # type: ignore[attr-defined]


def test_a_nul_in_a_title_is_dropped() -> None:
    from assistant.knowledge.extract import extract

    # A PDF's title in UTF-16 (its byte-order mark first) holding a U+0000 between two words.
    utf16 = "\xfe\xff" + "".join(f"\x00{c}" for c in "Nacelle") + "\x00\x00" + "".join(f"\x00{c}" for c in "inspection")
    extracted = extract("memo.pdf", make_pdf("Bearing inspection notes", utf16))
    assert extracted.title == "Nacelle inspection" and "\x00" not in extracted.title
