"""Shared fixtures' data for the knowledge, web and code tests: two organisations, files to upload."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.test import Client

from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs.models import Membership, Organisation
from tests.waiting import wait_until

# A small corpus whose ranking is known: for "turbine maintenance", both words in the title and
# repeated in the text first, then one word in the title and both in the text, then one word once.
CORPUS = [
    ("Turbine maintenance schedule", "Turbine maintenance every spring: each turbine gets a full maintenance check."),
    ("Maintenance report 2024", "The maintenance crew replaced two gearboxes on one turbine."),
    ("Supplier list", "Blades from Nordwind; the turbine controller from Kestrel Systems."),
    ("Canteen menu", "Lunch menu for the week: soup, salad, and a vegetarian dish."),
]
RANKING_QUERY = "turbine maintenance"
EXPECTED_ORDER = ["Turbine maintenance schedule", "Maintenance report 2024", "Supplier list"]
SECRET = "Confidential: the zorglub merger closes on 2025-03-01."


@dataclass
class Org:
    org: Organisation
    user: User
    kb: KnowledgeBase
    docs: list[Document]
    admin: User

    def client(self) -> Client:
        """Signed in as a member (not an admin) of the organisation."""
        c = Client()
        c.force_login(self.user)
        return c

    def admin_client(self) -> Client:
        """Signed in as an admin of the organisation."""
        c = Client()
        c.force_login(self.admin)
        return c


def make_org(slug: str, corpus: list[tuple[str, str]], kb_slug: str = "factures") -> Org:
    org = Organisation.objects.create(name=slug.title(), slug=slug)
    user = get_user_model().objects.create_user(username=f"{slug}-user", password=None)
    Membership.objects.create(organisation=org, user=user, role="member")
    admin = get_user_model().objects.create_user(username=f"{slug}-admin", password=None)
    Membership.objects.create(organisation=org, user=admin, role="admin")
    kb = KnowledgeBase.objects.create(organisation=org, slug=kb_slug, name=kb_slug.title())
    docs = [Document.objects.create(knowledge_base=kb, title=t, text=x) for t, x in corpus]
    return Org(org, user, kb, docs, admin)


def two_orgs() -> tuple[Org, Org]:
    """Organisation A with the ranking corpus; B with a base of the same slug holding a secret."""
    a = make_org("alpha", CORPUS)
    b = make_org(
        "beta", [("Zorglub merger", SECRET), ("Turbine maintenance at Beta", "turbine maintenance turbine maintenance")]
    )
    return a, b


def pdf_file(objects: list[bytes], info: int | None = None) -> bytes:
    """A PDF of ``objects`` (numbered from 1, the catalog first), its cross-reference table and trailer."""
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    extra = b" /Info %d 0 R" % info if info is not None else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, extra, xref)
    return out


def make_pdf(text: str, title: str = "") -> bytes:
    """A minimal, valid one-page PDF whose text layer is ``text``."""

    def esc(s: str) -> bytes:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")

    content = b"BT /F1 12 Tf 72 720 Td (" + esc(text) + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (" + esc(title) + b") >>",
    ]
    return pdf_file(objects, info=6)


def make_docx(paragraphs: list[str], title: str = "") -> bytes:
    import docx

    document = docx.Document()
    for p in paragraphs:
        document.add_paragraph(p)
    document.core_properties.title = title
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def check_ranking(a: Org, b: Org) -> None:
    """The ranking every database must give on ``CORPUS``, confined to one organisation."""
    from assistant.knowledge.fulltext import search

    hits, total = search(a.org.pk, "factures", RANKING_QUERY, 8)
    assert [h.title for h in hits] == EXPECTED_ORDER
    assert total == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.kb == "factures" and h.id.startswith("doc-") for h in hits)
    assert "**turbine**" in hits[1].snippet.lower() and "**maintenance**" in hits[1].snippet.lower()
    ids = {d.public_id for d in b.docs}
    assert not ids & {h.id for h in hits}, "another organisation's documents never show up"
    # Organisation B has a base with the same slug: its search sees its own documents only.
    hits_b, total_b = search(b.org.pk, "factures", RANKING_QUERY, 8)
    assert {h.id for h in hits_b} <= ids and total_b == 1
    assert search(a.org.pk, "factures", "zorglub merger", 8) == ([], 0)
    assert search(a.org.pk, "no-such-base", RANKING_QUERY, 8) == ([], 0)
    # The limit cuts the hits, not the count.
    limited, count = search(a.org.pk, "factures", RANKING_QUERY, 1)
    assert [h.title for h in limited] == EXPECTED_ORDER[:1] and count == 3


def fts_rowids(word: str) -> set[int]:
    """The document ids the full-text index itself answers for ``word``, whatever the documents' table holds.

    SQLite's FTS5 table has external content: its index keeps the entries a missed delete left behind.
    """
    from django.db import connection

    from assistant.knowledge.fulltext import CONFIG, FTS_TABLE, PG_VECTOR

    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [f'"{word}"'])
            return {int(row[0]) for row in cursor.fetchall()}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {PG_VECTOR.table} WHERE {PG_VECTOR.column} @@ plainto_tsquery(%s, %s)", [CONFIG, word]
        )
        return {int(row[0]) for row in cursor.fetchall()}


def check_base_deletion(a: Org, b: Org) -> None:
    """Deleting A's base removes its documents from the search; B's base of the same slug keeps its own."""
    from assistant.knowledge.fulltext import search
    from assistant.knowledge.uploads import delete_base

    ids = {d.pk for d in a.docs}
    assert ids & fts_rowids("turbine") and search(a.org.pk, "factures", RANKING_QUERY, 8)[1] == 3
    assert delete_base(a.kb) == len(CORPUS)
    assert not KnowledgeBase.objects.filter(pk=a.kb.pk).exists() and not Document.objects.filter(pk__in=ids).exists()
    assert not ids & fts_rowids("turbine") and not ids & fts_rowids("canteen")
    assert search(a.org.pk, "factures", RANKING_QUERY, 8) == ([], 0)
    hits_b, total_b = search(b.org.pk, "factures", RANKING_QUERY, 8)
    assert total_b == 1 and hits_b[0].title == "Turbine maintenance at Beta"
    # A new base of the same slug starts empty: nothing of the deleted one comes back.
    KnowledgeBase.objects.create(organisation=a.org, slug="factures", name="Factures again")
    assert search(a.org.pk, "factures", RANKING_QUERY, 8) == ([], 0)


def extract_pending() -> None:
    """Extract the uploads still processing, as the pool does once they are committed, in the test's transaction.

    The extraction itself is the real one (a child process with its limits); only the pool's thread is
    left out, since a test that rolls back never commits (transactional tests use the pool itself).
    """
    from assistant.knowledge import processing

    for pk in Document.objects.filter(status=Document.PROCESSING).values_list("pk", flat=True):
        processing.process(pk)


def wait_processed(*pks: int, timeout: float = 90) -> list[Document]:
    """Wait until the pool has finished with these documents (transactional tests); them, reloaded."""
    processing = Document.objects.filter(pk__in=pks, status=Document.PROCESSING)
    wait_until(lambda: not processing.exists(), f"documents {pks} to be processed", seconds=timeout)
    return list(Document.objects.filter(pk__in=pks).order_by("pk"))


def pdf_bomb(megabytes: int = 70) -> bytes:
    """A small PDF whose 3 pages share one content stream that inflates to ``megabytes`` MB of whitespace."""
    import zlib

    content = zlib.compress(b"BT /F1 12 Tf 72 720 Td (bomb) Tj ET\n" + b" " * (megabytes * 1_000_000), 9)
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 6 0 R 7 0 R] /Count 3 >>",
        page,
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        page,
        page,
    ]
    return pdf_file(objects)


def docx_bomb(megabytes: int = 190) -> bytes:
    """A small .docx whose word/document.xml expands to about ``megabytes`` MB of paragraphs."""
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(make_docx(["bomb"])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for info in source.infolist():
            if info.filename != "word/document.xml":
                archive.writestr(info, source.read(info))
                continue
            with archive.open("word/document.xml", "w", force_zip64=True) as part:
                part.write(
                    b'<?xml version="1.0" encoding="UTF-8"?><w:document '
                    b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
                )
                block = (b"<w:p><w:r><w:t>" + b"turbine " * 100 + b"</w:t></w:r></w:p>") * 1000
                for _ in range(megabytes * 1_000_000 // len(block)):
                    part.write(block)
                part.write(b"</w:body></w:document>")
    return out.getvalue()


def check_ready_only(a: Org, b: Org) -> None:
    """A document processing or failed is neither found nor read; once ready, it is (any database)."""
    from asgiref.sync import async_to_sync

    from assistant.knowledge.backend import OrgKnowledge
    from assistant.knowledge.fulltext import search

    pending = Document.objects.create(knowledge_base=a.kb, title="Okapi", text="okapi", status=Document.PROCESSING)
    failed = Document.objects.create(
        knowledge_base=a.kb, title="Okapi failed", text="okapi", status=Document.FAILED, failure="expanded"
    )
    knowledge = OrgKnowledge(a.org.pk)
    assert search(a.org.pk, "factures", "okapi", 8) == ([], 0)
    assert async_to_sync(knowledge.read)([pending.public_id, failed.public_id]) == {}
    assert pending.public_id not in {d.id for d in async_to_sync(knowledge.documents)("factures")}
    info = async_to_sync(knowledge.describe)("factures")
    assert info is not None and info.document_count == len(a.docs)
    Document.objects.filter(pk=pending.pk).update(status=Document.READY)
    hits, total = search(a.org.pk, "factures", "okapi", 8)
    assert total == 1 and hits[0].id == pending.public_id
    assert set(async_to_sync(knowledge.read)([pending.public_id, failed.public_id])) == {pending.public_id}
