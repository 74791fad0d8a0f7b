"""Tables: CSV (English and French), XLSX (one table per sheet) and Parquet uploads become tables whose rows are
searchable; ``data_tables`` and ``data_query`` read them, read-only, within the caller's scope, under limits.

Uploads go through the page and the real extraction child; the tools are built as a run builds them
(``execution.run_toolbox``), over the organisation's own database and stored files.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django import Settings

from assistant.engine.errors import OutOfScope, ToolError
from assistant.engine.scope import Scope
from assistant.engine.tools import Tool
from assistant.knowledge.fulltext import search
from assistant.knowledge.models import Document, KnowledgeBase, Table
from assistant.knowledge.processing import table_name
from assistant.knowledge.uploads import delete_document
from assistant.runs.execution import run_toolbox
from tests.knowledge.knowledge_support import Org, make_org, two_orgs, wait_processed

pytestmark = pytest.mark.django_db(transaction=True)


ENGLISH = (
    b"client,date,amount,status\nAcme,2024-01-15,1200.50,paid\nGlobex,2024-02-01,300,late\nAcme,2024-03-10,99.5,paid\n"
)
FRENCH = "client;date;montant;statut\nDupont;15/01/2024;1 234,50;payée\nMartin;03/02/2024;980,00;en retard\nDupont;01/03/2024;12 000,75 €;payée\n"


def xlsx() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Feuil1"
    sheet.append(["client", "montant", "date"])
    sheet.append(["Dupont", 1234.5, dt.datetime(2024, 1, 2)])
    sheet.append(["Martin", 12, dt.datetime(2024, 2, 3)])
    stock = book.create_sheet("Stock")
    stock.append(["article", "quantité"])
    stock.append(["vis", 100])
    stock.append(["écrou", 250])
    book.create_sheet("Vide")
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def entity_bomb() -> bytes:
    """A workbook whose one cell is a billion laughs: nine levels of entities, ten each (1 GB of "lol")."""
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(xlsx()))
    levels = "".join(f'<!ENTITY l{i + 1} "' + f"&l{i};" * 10 + '">' for i in range(9))
    dtd = f'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY l0 "lol">{levels}]>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/worksheets/sheet1.xml":
                body = data.decode()
                body = body.split("?>", 1)[1] if body.startswith("<?xml") else body
                start, end = body.index("<sheetData>"), body.index("</sheetData>") + len("</sheetData>")
                cell = '<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&l9;</t></is></c></row></sheetData>'
                data = (dtd + body[:start] + cell + body[end:]).encode()
            archive.writestr(info, data)
    return out.getvalue()


def parquet(tmp_path: Path) -> bytes:
    import duckdb

    path = tmp_path / "source.parquet"
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT 'capteur-' || (range % 3) AS capteur, (range * 1.5)::DOUBLE AS mesure FROM range(10)) TO '{path}' (FORMAT parquet)"
    )
    con.close()
    return path.read_bytes()


def invoices(rows: int = 20) -> bytes:
    lines = ["client;date;montant"] + [f"Client {i % 4};{1 + i % 28:02d}/01/2024;{i},50" for i in range(rows)]
    return "\n".join(lines).encode()


def upload(org: Org, *files: tuple[str, bytes], kb: str = "factures") -> list[Document]:
    client = Client()
    client.force_login(org.user)
    response = client.post(reverse("kb_base", args=[kb]), {"files": [SimpleUploadedFile(n, d) for n, d in files]})
    assert response.status_code == 302, response.content[:500]
    names = [n for n, _ in files]
    pks = list(
        Document.objects.filter(knowledge_base__organisation=org.org, filename__in=names).values_list("pk", flat=True)
    )
    docs = wait_processed(*pks)
    assert all(d.status == Document.READY for d in docs), [(d.filename, d.failure, d.failure_params) for d in docs]
    return docs


def columns(table: Table) -> list[tuple[str, str]]:
    return [(c, k) for c, k in table.columns]


async def tools(org: Org, scope: Scope) -> dict[str, Tool]:
    box = await run_toolbox(org.org.pk)
    return {t.spec.name: t for t in box.tools_for(scope)}


async def query(org: Org, sql: str, scope: Scope | None = None) -> dict[str, Any]:
    tool = (await tools(org, scope or Scope(("factures",))))["data_query"]
    result: dict[str, Any] = json.loads((await tool.run({"sql": sql})).content)
    return result


# Extraction -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        (
            "ventes.csv",
            ENGLISH,
            [("client", "VARCHAR"), ("date", "DATE"), ("amount", "DOUBLE"), ("status", "VARCHAR")],
        ),
        (
            "factures-2024.csv",
            FRENCH.encode("cp1252"),
            [("client", "VARCHAR"), ("date", "DATE"), ("montant", "DOUBLE"), ("statut", "VARCHAR")],
        ),
    ],
)
def test_a_csv_becomes_a_typed_table_english_or_french(
    media: Path, name: str, data: bytes, expected: list[tuple[str, str]]
) -> None:
    a, _ = two_orgs()
    (doc,) = upload(a, (name, data))
    (table,) = Table.objects.filter(document=doc)
    assert table.name == Path(name).stem.replace("-", "_") and table.row_count == 3 and table.sheet == ""
    assert columns(table) == expected
    assert Path(table.file.path).read_bytes()[:4] == b"PAR1" and Path(table.file.path).is_relative_to(media)
    # Its rows are the document's text, under the table's name and columns: searchable like any document.
    assert doc.text.startswith(f"Table {table.name}: 3 rows; columns: client (VARCHAR), date (DATE)")
    word = "globex" if name == "ventes.csv" else "martin"
    hits, total = search(a.org.pk, "factures", word, 8)
    assert total == 1 and hits[0].id == doc.public_id


def test_french_numbers_and_dates_are_read_as_such(media: Path) -> None:
    a, _ = two_orgs()
    upload(a, ("factures-2024.csv", FRENCH.encode("cp1252")))
    sql = "SELECT client, SUM(montant) AS total, MIN(date) AS premiere FROM factures_2024 GROUP BY client ORDER BY 1"
    data = _sync_query(a, sql)
    assert data["row_count"] == 2
    assert data["table"].splitlines()[2:] == ["| Dupont | 13235.25 | 2024-01-15 |", "| Martin | 980 | 2024-02-03 |"]


def test_a_short_row_of_a_csv_gets_nulls_rather_than_failing_the_file(media: Path) -> None:
    a, _ = two_orgs()
    upload(a, ("mesures.csv", b"capteur,min,max\nA,1,3\nB,2\nC,5,8\n"))
    (table,) = Table.objects.filter(knowledge_base=a.kb)
    assert columns(table) == [("capteur", "VARCHAR"), ("min", "BIGINT"), ("max", "BIGINT")] and table.row_count == 3
    assert _sync_query(a, "SELECT capteur FROM mesures WHERE max IS NULL")["table"].splitlines()[2] == "| B |"


def test_an_xlsx_gives_one_table_per_sheet_that_holds_something(media: Path) -> None:
    a, _ = two_orgs()
    (doc,) = upload(a, ("Ventes 2024.xlsx", xlsx()))
    tables = list(Table.objects.filter(document=doc).order_by("pk"))
    assert [(t.name, t.sheet, t.row_count) for t in tables] == [
        ("ventes_2024__feuil1", "Feuil1", 2),
        ("ventes_2024__stock", "Stock", 2),
    ]
    assert columns(tables[0]) == [("client", "VARCHAR"), ("montant", "DOUBLE"), ("date", "DATE")]
    assert columns(tables[1]) == [("article", "VARCHAR"), ("quantité", "BIGINT")]
    assert "Table ventes_2024__stock (sheet Stock): 2 rows" in doc.text
    page = a.client().get(reverse("kb_base", args=["factures"])).content.decode()
    # Each table in words; its name in queries is for the admins (a member's page has none).
    assert page.count("a table of 2 rows") == 2
    assert "ventes_2024__feuil1" not in page
    french = a.client()
    french.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "fr"
    assert "une table de 2 lignes" in french.get(reverse("kb_base", args=["factures"])).content.decode()
    assert search(a.org.pk, "factures", "écrou", 8)[1] == 1


def test_a_parquet_file_becomes_a_table(media: Path, tmp_path: Path) -> None:
    a, _ = two_orgs()
    (doc,) = upload(a, ("mesures.parquet", parquet(tmp_path)))
    (table,) = Table.objects.filter(document=doc)
    assert (table.name, table.row_count) == ("mesures", 10)
    assert columns(table) == [("capteur", "VARCHAR"), ("mesure", "DOUBLE")]
    assert search(a.org.pk, "factures", "capteur", 8)[1] == 1


def test_a_parquet_bomb_fails_by_the_expanded_limit(media: Path, tmp_path: Path) -> None:
    """300 KB of Parquet that decompress to 60 million rows: DuckDB's memory limit in the child stops it."""
    import duckdb

    path = tmp_path / "bomb.parquet"
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT 'the same long string, over and over again' AS s, 1 AS n FROM range(60000000)) "
        f"TO '{path}' (FORMAT parquet, COMPRESSION zstd)"
    )
    con.close()
    data = path.read_bytes()
    assert len(data) < 1_000_000
    a, _ = two_orgs()
    a.client().post(reverse("kb_base", args=["factures"]), {"files": [SimpleUploadedFile("bomb.parquet", data)]})
    (doc,) = wait_processed(*Document.objects.filter(filename="bomb.parquet").values_list("pk", flat=True))
    assert (doc.status, doc.failure, doc.failure_params) == (Document.FAILED, "expanded", {"limit_mb": 50})
    assert not Table.objects.exists() and not list((media / f"kb/{a.kb.pk}").glob("tables/*"))


def test_table_names_are_unique_within_the_base_and_files_go_with_the_document(media: Path) -> None:
    a, _ = two_orgs()
    first, _ = upload(a, ("factures.csv", ENGLISH), ("Factures.CSV", ENGLISH))
    names = sorted(Table.objects.filter(knowledge_base=a.kb).values_list("name", flat=True))
    assert names == ["factures", "factures_2"]
    assert table_name("2024 ventes.xlsx", "Feuil 1", set()) == "t_2024_ventes__feuil_1"
    stored = [Path(t.file.path) for t in Table.objects.filter(document=first)]
    delete_document(first)
    assert not Table.objects.filter(document_id=first.pk).exists() and not any(p.exists() for p in stored)


def test_a_broken_table_file_fails_with_its_reason(media: Path) -> None:
    a, _ = two_orgs()
    client = a.client()
    client.post(reverse("kb_base", args=["factures"]), {"files": [SimpleUploadedFile("x.parquet", b"PAR1 broken")]})
    client.post(reverse("kb_base", args=["factures"]), {"files": [SimpleUploadedFile("y.xlsx", b"PK\x03\x04 nope")]})
    client.post(reverse("kb_base", args=["factures"]), {"files": [SimpleUploadedFile("lol.xlsx", entity_bomb())]})
    names = ["x.parquet", "y.xlsx", "lol.xlsx"]
    docs = wait_processed(*Document.objects.filter(filename__in=names).values_list("pk", flat=True))
    assert [(d.status, d.failure, d.failure_params) for d in docs] == [
        (Document.FAILED, "corrupt", {"kind": "parquet"}),
        (Document.FAILED, "corrupt", {"kind": "xlsx"}),
        (Document.FAILED, "corrupt", {"kind": "xlsx"}),  # entities are refused (defusedxml), never expanded
    ]
    assert not Table.objects.exists()
    page = client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert "could not be read as a Parquet file" in page and "as an Excel workbook (.xlsx)" in page
    client.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "fr"
    page = client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert "Échec : il n’a pas pu être lu comme un fichier Parquet" in page


# The tools ------------------------------------------------------------------------------------


def _sync_query(org: Org, sql: str) -> dict[str, Any]:
    from asgiref.sync import async_to_sync

    return async_to_sync(query)(org, sql)


@pytest.fixture
async def bases(media: Path) -> tuple[Org, Org]:
    """A: ``factures`` with an invoices table, ``contrats`` with a table of its own, ``notes`` with none.
    B (another organisation): a base ``factures`` too, whose table of the same name holds a secret."""

    def build() -> tuple[Org, Org]:
        a, _ = two_orgs()
        b = make_org("gamma", [], kb_slug="factures")
        upload(a, ("factures.csv", invoices()))
        KnowledgeBase.objects.create(organisation=a.org, slug="contrats", name="Contrats")
        upload(a, ("contrats.csv", b"contrat,montant\nC-1,5000\n"), kb="contrats")
        KnowledgeBase.objects.create(organisation=a.org, slug="notes", name="Notes")
        upload(b, ("factures.csv", b"client,montant\nZorglub secret,999999\n"))
        return a, b

    return await sync_to_async(build)()


async def test_the_table_tools_come_only_with_bases_that_hold_tables(bases: tuple[Org, Org]) -> None:
    a, _ = bases
    assert set(await tools(a, Scope(("factures",)))) == {"kb_search", "kb_read", "data_tables", "data_query"}
    assert set(await tools(a, Scope(("notes",)))) == {"kb_search", "kb_read"}
    assert set(await tools(a, Scope(web=False))) == set()
    spec = (await tools(a, Scope(("factures",))))["data_query"].spec
    assert "factures(client VARCHAR, date DATE, montant DOUBLE)" in spec.description
    assert "contrats" not in spec.description and "read-only" in spec.description


async def test_a_base_s_documents_name_the_tables_they_hold_for_run_code_s_index(bases: tuple[Org, Org]) -> None:
    """A table's name comes from its file, its document's title is what people named it: the index of ``run_code``
    says which documents hold which of ``data_query``'s tables (the demo's script reads only those)."""
    from assistant.knowledge.backend import OrgKnowledge

    a, _ = bases
    table = await Document.objects.aget(
        knowledge_base__organisation=a.org, knowledge_base__slug="factures", tables__isnull=False
    )
    table.title = "Factures 2024 (export)"
    await table.asave(update_fields=["title"])
    documents = {d.title: d.tables for d in await OrgKnowledge(a.org.pk).documents("factures")}
    assert documents.pop("Factures 2024 (export)") == ("factures",)
    assert set(documents.values()) == {()}, "a document that holds no table names none"
    assert [d.tables for d in await OrgKnowledge(a.org.pk).documents("contrats")] == [("contrats",)]


async def test_data_tables_lists_the_scopes_tables_with_columns_and_row_counts(bases: tuple[Org, Org]) -> None:
    a, _ = bases
    outcome = await (await tools(a, Scope(("factures", "contrats"))))["data_tables"].run({})
    listed = json.loads(outcome.content)["tables"]
    assert [(t["name"], t["kb"], t["rows"]) for t in listed] == [
        ("contrats", "contrats", 1),
        ("factures", "factures", 20),
    ]
    assert listed[1]["columns"] == [
        {"name": "client", "type": "VARCHAR"},
        {"name": "date", "type": "DATE"},
        {"name": "montant", "type": "DOUBLE"},
    ]
    assert outcome.action is not None and outcome.action.count == 2
    only = json.loads((await (await tools(a, Scope(("factures",))))["data_tables"].run({})).content)["tables"]
    assert [t["name"] for t in only] == ["factures"]


async def test_data_query_answers_a_small_table_with_its_row_count_action_and_source(bases: tuple[Org, Org]) -> None:
    a, _ = bases
    sql = "SELECT client, SUM(montant) AS total FROM factures GROUP BY client ORDER BY client"
    tool = (await tools(a, Scope(("factures",))))["data_query"]
    outcome = await tool.run({"sql": sql})
    data = json.loads(outcome.content)
    assert data["row_count"] == 4 and data["columns"] == ["client", "total"] and "note" not in data
    assert data["table"].splitlines()[:3] == ["| client | total |", "| --- | --- |", "| Client 0 | 42.5 |"]
    assert outcome.action is not None
    assert (outcome.action.tool, outcome.action.kind, outcome.action.label, outcome.action.count) == (
        "data_query",
        "query",
        sql,
        4,
    )
    doc = await Document.objects.aget(knowledge_base=a.kb, filename="factures.csv")
    assert [s.id for s in outcome.sources] == [doc.public_id]
    # A WITH … SELECT is a query too; its own names are not tables.
    data = await query(a, "WITH t AS (SELECT montant FROM factures) SELECT count(*) AS n FROM t;")
    assert data["table"].splitlines()[2] == "| 20 |"
    # A JOIN … USING, whose names DuckDB lists only with the tables at hand: the scope's are all loaded.
    data = await query(a, "SELECT count(*) AS n FROM factures a JOIN factures b USING (client)")
    assert data["table"].splitlines()[2] == "| 100 |"


async def test_rows_past_the_limit_are_cut_with_a_note(bases: tuple[Org, Org], settings: Settings) -> None:
    a, _ = bases
    settings.DATA_QUERY_MAX_ROWS = 5
    data = await query(a, "SELECT * FROM factures ORDER BY montant DESC")
    assert data["row_count"] == 20 and len(data["table"].splitlines()) == 2 + 5
    assert data["table"].splitlines()[2].startswith("| Client 3 | 2024-01-20 | 19.5 |")
    assert "first 5 of 20 rows" in data["note"]


async def test_a_query_that_runs_too_long_is_interrupted(bases: tuple[Org, Org], settings: Settings) -> None:
    a, _ = bases
    settings.DATA_QUERY_SECONDS = 0.5
    # 20⁷ rows, each hashed: no statistic lets DuckDB skip the work.
    cross = (
        "SELECT count(*) FROM factures a, factures b, factures c, factures d, factures e, factures f, factures g "
        "WHERE hash(a.montant, b.montant, c.montant, d.montant, e.montant, f.montant, g.montant) % 1000 = 0"
    )
    with pytest.raises(ToolError, match=r"stopped at the time limit \(0.5 s\)"):
        await query(a, cross)


REFUSED = [
    ("INSERT INTO factures VALUES ('x', DATE '2024-01-01', 1)", "INSERT statement is refused \\(it writes\\)"),
    ("UPDATE factures SET montant = 0", "UPDATE statement is refused"),
    ("DELETE FROM factures", "DELETE statement is refused"),
    ("CREATE TABLE x AS SELECT * FROM factures", "CREATE statement is refused"),
    ("DROP TABLE factures", "DROP statement is refused"),
    ("ATTACH '/tmp/other.db' AS other", "ATTACH statement is refused \\(it attaches a database\\)"),
    ("COPY factures TO '/tmp/out.csv'", "COPY statement is refused \\(it copies to or from a file\\)"),
    ("INSTALL httpfs", "refused \\(it installs or loads an extension\\)"),
    ("LOAD httpfs", "refused \\(it installs or loads an extension\\)"),
    ("SET enable_external_access = true", "SET statement is refused \\(it changes a setting\\)"),
    ("PRAGMA enable_profiling", "PRAGMA statement is refused"),
    ("EXPORT DATABASE '/tmp/dump'", "EXPORT statement is refused"),
    ("SELECT 1; SELECT 2", "exactly one statement; this SQL holds 2"),
    ("SELECT * FROM read_csv('/etc/passwd')", "cannot read files"),
    ("SELECT * FROM read_text('/etc/hostname')", "cannot read files"),
    ("SELECT * FROM glob('/*')", "cannot read files"),
    ("SELECT * FROM '/etc/passwd'", "cannot read files: /etc/passwd is not a table"),
    ("SELECT * FROM 'https://example.com/data.csv'", "cannot read files"),
    ("SELEKT * FROM factures", "could not be parsed"),
]


async def test_anything_but_one_select_over_the_scopes_tables_is_a_tool_error(bases: tuple[Org, Org]) -> None:
    a, _ = bases
    for sql, message in REFUSED:
        with pytest.raises(ToolError, match=message):
            await query(a, sql)
    # The table is untouched.
    assert (await query(a, "SELECT count(*) AS n, sum(montant) AS s FROM factures"))["table"].splitlines()[2] == (
        "| 20 | 200 |"
    )


async def test_a_table_of_another_base_or_organisation_is_out_of_scope(bases: tuple[Org, Org]) -> None:
    a, b = bases
    with pytest.raises(OutOfScope, match=r"No table 'contrats' .* outside your scope\. Tables you can query: factures"):
        await query(a, "SELECT * FROM contrats")
    with pytest.raises(OutOfScope, match="No table 'contrats'"):
        await query(a, "SELECT * FROM factures JOIN contrats ON true")
    # Functions that name a table by a string find only the tables this call loaded: the scope's.
    with pytest.raises(ToolError, match="contrats"):
        await query(a, "SELECT * FROM factures, query_table('contrats')")
    # B's base has the same slug and its table the same name: each organisation reads its own.
    mine = await query(a, "SELECT max(montant) AS m FROM factures")
    theirs = await query(b, "SELECT client FROM factures")
    assert "999999" not in mine["table"] and "Zorglub secret" in theirs["table"]
    # Both bases in one scope: the same name in two bases is <kb>__<name>.
    await sync_to_async(upload)(a, ("factures.csv", b"client,montant\nDoublon,1\n"), kb="contrats")
    names = json.loads((await (await tools(a, Scope(("factures", "contrats"))))["data_tables"].run({})).content)[
        "tables"
    ]
    assert [t["name"] for t in names] == ["contrats", "contrats__factures", "factures__factures"]
    both = await query(a, "SELECT client FROM contrats__factures", Scope(("factures", "contrats")))
    assert "Doublon" in both["table"]


# Through the page, with the offline demo model and the demo data -------------------------------


@pytest.mark.parametrize(
    ("level", "agents", "language"), [("standard", False, "en"), ("approfondi", True, "fr"), ("standard", False, "fr")]
)
async def test_the_demo_queries_the_invoices_table_through_the_page(
    fast_demo: None, level: str, agents: bool, language: str
) -> None:
    """The demo data's invoices CSV is a table of ``factures``: the demo model (alone, or its agent) runs a
    data_query totalling it by client, the panel's step keeps the SQL and the row count, the answer shows them with
    its numbers in the reader's format (39,350 in English, 39 350 in French; the tool's result, the model's data,
    keeps them as numbers: ``test_data_query_answers_a_small_table_with_its_row_count_action_and_source``)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import AsyncClient

    from assistant.runs import execution
    from assistant.runs.models import Run, Step

    await sync_to_async(call_command)("load_demo", verbosity=0)
    table = await Table.objects.select_related("document").aget(knowledge_base__slug="factures")
    assert (table.name, table.row_count, table.document.filename) == ("factures", 20, "factures.csv")
    client = AsyncClient()
    client.cookies["django_language"] = language
    await client.aforce_login(await get_user_model().objects.aget(username="demo"))
    resources = ["kb:factures", "agents"] if agents else ["kb:factures"]
    question = "Factures de Bimbamjob en 2024" if language == "fr" else "Bimbamjob invoices 2024"
    ask = {"text": question, "model": "demo-large", "level": level, "resources": resources}
    assert (await client.post("/c/new", ask)).status_code == 302
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "ok"
    kind = "agent_action" if agents else "tool_result"
    actions = [s.data["action"] async for s in Step.objects.filter(run=run, kind=kind) if s.data.get("action")]
    (queried,) = [a for a in actions if a["tool"] == "data_query"]
    assert queried["kind"] == "query" and queried["count"] == 5
    rows = "lignes" if language == "fr" else "rows"  # its count column named in the demo's language
    assert queried["label"] == (
        f"SELECT client, SUM(montant) AS total, COUNT(*) AS {rows} FROM factures GROUP BY client ORDER BY total DESC"
    )
    assert [a["tool"] for a in actions][-1] == "data_query"  # after the searches and the read
    if language == "fr":
        assert "| Bimbamjob | 39\u00a0350 | 5 |" in run.answer and "| Verdant Foods | 4\u00a0600 | 2 |" in run.answer
    else:
        assert "| Bimbamjob | 39,350 | 5 |" in run.answer and "| Verdant Foods | 4,600 | 2 |" in run.answer
    assert "39350" not in run.answer and ".0 |" not in run.answer  # nor a row quoted from the table's text (18400.0)
    assert table.document.public_id in {s["id"] for s in run.sources}
    page = (await client.get(f"/c/{run.conversation_id}/")).content.decode()
    if language == "fr":
        assert "Requête « SELECT client, SUM(montant)" in page and " » : 5 lignes" in page
    else:
        assert "Query “SELECT client, SUM(montant)" in page and "”: 5 rows" in page


def test_a_query_s_row_count_is_worded_in_the_reader_s_number_format() -> None:
    from django.utils import translation

    from assistant.chat.templatetags.chat import action_text
    from assistant.engine.events import Action

    action = Action(tool="data_query", kind="query", label="SELECT * FROM factures", count=12345)
    with translation.override("en"):
        assert action_text(action) == "Query “SELECT * FROM factures”: 12,345 rows"
    with translation.override("fr"):
        assert action_text(action) == "Requête « SELECT * FROM factures » : 12\u00a0345 lignes"


# A scripted run over the organisation's own tables ---------------------------------------------


async def test_a_scripted_run_queries_through_the_main_model_and_an_agent_each_within_its_scope(
    bases: tuple[Org, Org],
) -> None:
    """The run's toolbox as ``execute_run`` builds it (``run_toolbox``), scripted models at the boundary: the main
    model totals its base's table; its agent, given ``factures`` only, has its file read, its attach and its
    reach into ``contrats`` refused, and nothing of ``contrats`` or of the other organisation reaches it."""
    from assistant.engine.events import AgentAction, ToolResultEvent
    from tests.engine.engine_support import (
        AGENT_A,
        MAIN,
        call,
        delegate,
        harness,
        reply,
        scripted,
        submit,
        task,
        tool_payloads,
    )

    a, _ = bases
    box = await run_toolbox(a.org.pk)
    total = "SELECT client, SUM(montant) AS total FROM factures GROUP BY client ORDER BY total DESC LIMIT 1"
    attacks = [
        "SELECT * FROM read_csv('/etc/passwd')",
        "ATTACH '/tmp/x.db' AS x",
        "SELECT * FROM contrats",
        "SELECT client FROM factures WHERE client LIKE 'Zorglub%'",
    ]
    h = harness(
        {
            MAIN.id: scripted(
                reply(call("data_query", sql=total)),
                reply(delegate(task("Vérifie le total de Client 3.", AGENT_A.id, ["kb:factures"]))),
                reply(text="Client 3 : 57,5."),
            ),
            AGENT_A.id: scripted(
                reply(*(call("data_query", sql=sql) for sql in attacks)),
                reply(submit("Client 3 : 57,5 [doc].", [])),
            ),
        },
        knowledge_backend=box.knowledge,
        factories=box.factories,
    )
    outcome = await h.run(resources=("kb:factures", "kb:contrats", "agents"))

    assert outcome.status == "ok"
    [main_result] = tool_payloads(h.main.requests[1], "data_query")
    assert main_result["table"].splitlines()[2] == "| Client 3 | 57.5 |"
    [main_action] = [e.action for e in h.of(ToolResultEvent) if e.name == "data_query" and e.action]
    assert (main_action.kind, main_action.label, main_action.count) == ("query", total, 1)
    results = tool_payloads(h.model(AGENT_A.id).requests[1], "data_query")
    assert "cannot read files" in results[0]["error"]
    assert "ATTACH statement is refused" in results[1]["error"]
    assert "No table 'contrats'" in results[2]["error"]
    assert results[3]["row_count"] == 0  # the other organisation's "Zorglub secret" is not in this table
    seen = json.dumps([m.content for r in h.model(AGENT_A.id).requests for m in r.messages])
    assert "C-1" not in seen and "Zorglub secret" not in seen and "contrats(" not in seen
    assert [e.action.ok for e in h.of(AgentAction) if e.action.tool == "data_query"] == [False, False, False, True]
