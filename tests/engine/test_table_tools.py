"""data_tables and data_query in the engine, over an in-memory TableBackend: the statement checks, the scope through
delegation (an agent queries only its own bases' tables), Parquet given as bytes, Stop interrupting a query."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest

from assistant.api.trace import TraceBuilder
from assistant.api.trace_schemas import ToolStep
from assistant.engine.cancel import CancelToken
from assistant.engine.errors import ToolError
from assistant.engine.events import AgentAction, ToolResultEvent
from assistant.engine.query import QueryLimits, _Query, run_query
from assistant.engine.scope import Scope
from assistant.engine.sql import check_statement, markdown_table
from assistant.engine.tables import Column, TableCatalogue, TableInfo, query_names, table_tools
from assistant.engine.tools import Tool, run_tool_call
from assistant.engine.turns import Turn, turn
from assistant.engine.types import ToolCall
from tests.engine.engine_support import (
    AGENT_A,
    MAIN,
    STOPPED_WITH_RUN,
    call,
    delegate,
    harness,
    reply,
    scripted,
    submit,
    task,
    tool_payloads,
)
from tests.waiting import until


class MemoryTables:
    """Tables as Parquet bytes in memory, per base (``parquet`` gives bytes: the engine makes the local file)."""

    def __init__(self, tables: dict[tuple[str, str], tuple[TableInfo, bytes]]) -> None:
        self.data = tables

    async def tables(self, kbs: Sequence[str]) -> list[TableInfo]:
        return [info for (kb, _), (info, _) in sorted(self.data.items()) if kb in kbs]

    async def parquet(self, table: TableInfo) -> str | bytes:
        return self.data[(table.kb, table.name)][1]

    def catalogue(self) -> TableCatalogue:
        found: dict[str, list[TableInfo]] = {}
        for (kb, _), (info, _) in sorted(self.data.items()):
            found.setdefault(kb, []).append(info)
        return TableCatalogue(found)


def make_table(tmp: Path, kb: str, name: str, select: str) -> tuple[tuple[str, str], tuple[TableInfo, bytes]]:
    path = tmp / f"{kb}-{name}.parquet"
    con = duckdb.connect()
    con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    columns = tuple(Column(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {select}").fetchall())
    count = con.execute(f"SELECT count(*) FROM ({select})").fetchone()
    con.close()
    info = TableInfo(kb, name, f"doc-{name}", name.title(), columns, int(count[0]) if count else 0)
    return (kb, name), (info, path.read_bytes())


@pytest.fixture
def backend(tmp_path: Path) -> MemoryTables:
    return MemoryTables(
        dict(
            [
                make_table(
                    tmp_path,
                    "factures",
                    "factures",
                    "SELECT 'Zorglub' AS client, 1200.0 AS montant UNION ALL SELECT 'Acme', 300.0",
                ),
                make_table(tmp_path, "contrats", "contrats", "SELECT 'C-1' AS contrat, 'secret clause' AS clause"),
                make_table(tmp_path, "contrats", "factures", "SELECT 'Doublon' AS client, 1.0 AS montant"),
            ]
        )
    )


def test_only_one_select_passes_and_the_names_it_reads_come_back() -> None:
    assert check_statement("WITH t AS (SELECT * FROM factures) SELECT * FROM t JOIN contrats ON t.id = 1;") == (
        "WITH t AS (SELECT * FROM factures) SELECT * FROM t JOIN contrats ON t.id = 1",
        {"factures", "contrats"},
    )
    # DuckDB lists the names of a JOIN … USING only with the tables at hand: the call then loads all of the scope's.
    assert check_statement("SELECT * FROM factures JOIN contrats USING (id)")[1] is None
    for sql, why in [
        ("DELETE FROM factures", "DELETE statement is refused (it writes)"),
        ("SELECT 1; DROP TABLE factures", "this SQL holds 2"),
        ("ATTACH 'x.db'", "it attaches a database"),
        ("CALL pragma_version()", "CALL statement is refused (it is not a query)"),
    ]:
        with pytest.raises(ToolError) as refused:
            check_statement(sql)
        assert why in str(refused.value)


def test_same_names_in_two_bases_are_told_apart_and_cells_stay_on_one_line() -> None:
    a = TableInfo("factures", "ventes", "doc-1", "A", (), 1)
    b = TableInfo("comptes-rendus", "ventes", "doc-2", "B", (), 1)
    c = TableInfo("factures", "stock", "doc-3", "C", (), 1)
    assert list(query_names([a, b, c])) == ["factures__ventes", "comptes_rendus__ventes", "stock"]
    assert markdown_table(["a|b"], [["x\ny | z"], [None]], width=5) == "| a\\|b |\n| --- |\n| x y … |\n| NULL |"


async def test_an_agent_queries_only_the_tables_of_its_own_bases(backend: MemoryTables) -> None:
    sql = "SELECT client, SUM(montant) AS total FROM factures GROUP BY client ORDER BY total DESC"
    h = harness(
        {
            MAIN.id: scripted(reply(delegate(task("Totalise les factures.", AGENT_A.id))), reply(text="Fait.")),
            AGENT_A.id: scripted(
                reply(call("data_query", sql=sql), call("data_query", sql="SELECT * FROM contrats")),
                reply(submit("Zorglub : 1200 [doc-factures].", ["doc-factures"])),
            ),
        },
        factories=[table_tools(backend, backend.catalogue(), QueryLimits())],
    )
    outcome = await h.run(resources=("kb:factures", "kb:contrats", "agents"))

    first, second = h.model(AGENT_A.id).requests
    spec = next(t for t in first.tools if t.name == "data_query")
    assert "factures(client VARCHAR, montant DECIMAL(5,1))" in spec.description and "contrats" not in spec.description
    ok, refused = tool_payloads(second, "data_query")
    assert ok["row_count"] == 2 and ok["table"].splitlines()[2] == "| Zorglub | 1200.0 |"
    assert "No table 'contrats'" in refused["error"] and "secret clause" not in json.dumps(refused)
    [action] = [e.action for e in h.of(AgentAction) if e.action.tool == "data_query" and e.action.ok]
    assert (action.kind, action.label, action.count) == ("query", sql, 2)
    assert {s.id for s in outcome.agents[0].sources} >= {"doc-factures"}
    # The main model had both bases: both tables, the shared name told apart by base.
    main_spec = next(t for t in h.main.requests[0].tools if t.name == "data_query")
    assert "contrats__factures(" in main_spec.description and "factures__factures(" in main_spec.description
    assert not [e for e in h.of(ToolResultEvent) if e.name == "data_query"]


async def test_stop_interrupts_a_running_query(backend: MemoryTables) -> None:
    (_, (_, data)) = next(iter(backend.data.items()))
    slow = "SELECT count(*) FROM range(100000) a, range(100000) b WHERE a.range + b.range = 7"
    task_ = asyncio.create_task(run_query(slow, {"factures": data}, QueryLimits(seconds=60)))
    await asyncio.sleep(0.3)
    task_.cancel()
    with pytest.raises(asyncio.CancelledError):  # not TimeoutError: interrupted, long before its 60 s
        await asyncio.wait_for(task_, 45)


async def test_a_query_opens_its_connection_off_the_event_loop(
    backend: MemoryTables, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a DuckDB connection takes about 10 ms: on the loop it would hold up every run and page meanwhile."""
    (_, (_, data)) = next(iter(backend.data.items()))
    opened_on: list[int] = []
    connect = duckdb.connect

    def watched_connect(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
        opened_on.append(threading.get_ident())
        return connect(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", watched_connect)
    result = await run_query("SELECT count(*) AS n FROM factures", {"factures": data}, QueryLimits())
    assert result.rows == ((2,),)
    assert opened_on and threading.get_ident() not in opened_on


async def test_stop_before_the_connection_is_open_still_stops_the_query(backend: MemoryTables) -> None:
    """Stop may come while the query's thread is still opening its connection: the statement is not run."""
    (_, (_, data)) = next(iter(backend.data.items()))
    query = _Query(QueryLimits())
    query.interrupt()
    with pytest.raises(ToolError, match="interrupted"):
        await asyncio.to_thread(query.run, "SELECT count(*) FROM factures", {"factures": data})


def data_query(backend: MemoryTables, limits: QueryLimits) -> dict[str, Tool]:
    [tool] = [t for t in table_tools(backend, backend.catalogue(), limits)(Scope(("factures",))) if t.turn]
    return {"data_query": tool}


def query_call(sql: str) -> ToolCall:
    return ToolCall("q", "data_query", json.dumps({"sql": sql}))


async def test_queries_take_turns_and_stop_ends_a_wait_before_it_starts(backend: MemoryTables) -> None:
    """At most ``concurrent`` queries run at once in a loop (DuckDB takes a core each, the loop needs one): the others
    wait their turn (``DataQuery.turn``, taken by ``run_tool_call``), their time limit not started; Stop while one
    waits ends the wait: it never starts.

    No step depends on the machine's speed: the queries that hold the turns run until they are stopped, a wait is
    "at least" (``asyncio.sleep``), and the limits are seconds where a query needs milliseconds."""
    quick = data_query(backend, QueryLimits(seconds=30, concurrent=2))
    results = await asyncio.gather(
        *(run_tool_call(quick, query_call("SELECT count(*) AS n FROM factures"), "") for _ in range(8))
    )
    assert [json.loads(r.content)["table"].splitlines()[2] for r in results] == ["| 2 |"] * 8

    endless = "SELECT count(*) AS n FROM factures, range(100000) a, range(100000) b WHERE a.range + b.range = 7"
    held, stop, stop_held = data_query(backend, QueryLimits(seconds=600, concurrent=2)), CancelToken(), CancelToken()
    short = data_query(backend, QueryLimits(seconds=2, concurrent=2))
    holding = [asyncio.create_task(run_tool_call(held, query_call(endless), "", stop_held)) for _ in range(2)]
    waiting = asyncio.create_task(run_tool_call(short, query_call("SELECT 1 AS one FROM factures"), "", stop))
    later = asyncio.create_task(run_tool_call(short, query_call("SELECT 2 AS two FROM factures"), ""))
    try:
        await asyncio.sleep(3)  # longer than their limit: a limit counted while waiting would have ended them
        assert not waiting.done() and not later.done()  # the two turns are taken
        stop.cancel()  # Stop while it waits: at once, without waiting for a turn
        never = await asyncio.wait_for(waiting, 60)  # a guard: the turns are held for 600 s
        assert never.stopped is not None and not never.started and never.outcome is not None
    finally:
        stop_held.cancel()
        interrupted = [await task for task in holding]
    assert all(r.stopped is not None and r.started for r in interrupted)
    after = await asyncio.wait_for(later, 60)  # its turn came: its 2 s started then
    assert after.ok and json.loads(after.content)["row_count"] == 2


async def test_duckdb_s_errors_and_settings_name_no_path_of_the_server(backend: MemoryTables, tmp_path: Path) -> None:
    """DuckDB's home, extension and secret directories would show the server's home (and that it runs as root), its
    temporary files where a table is read from: the model sees the table's name and no path of the server."""
    (_, (_, data)) = next(iter(backend.data.items()))
    home = os.path.expanduser("~")
    said: list[str] = []
    for sql in ["SELECT * FROM duckdb_extensions()", "SELECT * FROM duckdb_secrets()"]:
        with pytest.raises(ToolError) as refused:
            await run_query(sql, {"factures": data}, QueryLimits())
        said.append(str(refused.value))
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(ToolError) as failed:
        await run_query("SELECT * FROM factures", {"factures": str(broken)}, QueryLimits())
    said.append(str(failed.value))
    assert "'factures'" in said[-1] or '"factures"' in said[-1], said[-1]
    settings = await run_query(
        "SELECT name, value FROM duckdb_settings()", {"factures": data}, QueryLimits(max_rows=500)
    )
    said += [f"{name}={value}" for name, value in settings.rows]
    for text in said:
        assert home not in text and str(tmp_path) not in text and "/.duckdb" not in text, text


async def test_stop_ends_a_running_query_and_a_waiting_one_never_starts(backend: MemoryTables) -> None:
    """The main model runs two queries at once with one turn: Stop interrupts the running one and releases the
    waiting one, which never starts; the run ends stopped with no other round, each step saying why."""
    slow = "SELECT count(*) AS n FROM factures, range(100000) a, range(100000) b WHERE a.range + b.range = 7"
    h = harness(
        {
            MAIN.id: scripted(
                reply(call("data_query", sql=slow), call("data_query", sql="SELECT count(*) AS n FROM factures")),
                reply(text="Cette réponse ne doit jamais être produite."),
            )
        },
        factories=[table_tools(backend, backend.catalogue(), QueryLimits(seconds=120, concurrent=1))],
    )

    async def stop_once_a_query_runs() -> None:
        await until(lambda: turn(Turn("data_query", 1)).locked(), "a query to take the turn")
        await asyncio.sleep(0.2)  # into DuckDB (were it not there yet, it would stop as well)
        h.ctx.cancel.cancel()

    stopper = asyncio.create_task(stop_once_a_query_runs())
    outcome = await h.run(resources=("kb:factures",))
    await stopper

    assert outcome.status == "stopped" and len(h.main.requests) == 1
    results = [e for e in h.of(ToolResultEvent) if e.name == "data_query"]
    assert len(results) == 2 and not any(r.ok for r in results)
    actions = [r.action for r in results]
    assert all(a is not None and a.stopped == STOPPED_WITH_RUN for a in actions)
    assert sorted(a.started for a in actions if a is not None) == [False, True]
    # The API's steps say it with the run's cause code, and which one never started.
    builder = TraceBuilder()
    for event in h.events:
        builder.add_event(event)
    steps = [s for s in builder.trace.steps if isinstance(s, ToolStep)]
    assert [(s.reason_code, s.started) for s in steps] == [
        ("stopped_by_user", a.started) for a in actions if a is not None
    ]
