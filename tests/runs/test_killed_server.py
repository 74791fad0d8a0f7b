"""A real embedded server killed mid-run (``kill -9``: no goodbye), then started again as ``make run`` starts it
(``recover_runs`` before serving): its run is no longer running, it ends failed with why as data, it keeps what its
agents had read as its sources, and nothing it held on its category stays held.

The run is the demo's delegating one, through the API, slowed down (each model call takes 1.5 s) so that the kill
lands while the agents are working and a model call holds tokens on the category.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from tests.live_server import DemoSpeed, start_server
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

SERVER = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from assistant.orgs import keys
from assistant.orgs.models import Organisation
call_command("migrate", verbosity=0)
if len(sys.argv) > 2:
    call_command("load_demo", verbosity=0)
    with open(sys.argv[2], "w") as f:
        json.dump(keys.create_key(Organisation.objects.get(slug="demo"), "demo")[1], f)
call_command("recover_runs", verbosity=0)  # as `make run` does before serving
call_command("runserver", sys.argv[1], use_reloader=False)
"""
QUESTION = "Bimbamjob: invoicing 2024, payment follow-up, commercial relationship. Conclude on the risk."
DELEGATING = {"tools_enabled": ["kb:factures", "kb:comptes-rendus", "agents"]}
SLOW: DemoSpeed = {"pace": "0.02", "latency": "1.5"}


def held(database: Path, run_id: str) -> tuple[int, int]:
    """The run's reservations (rows) and the tokens the demo's months hold reserved, read from the server's database."""
    with sqlite3.connect(database, timeout=10) as db:
        rows = db.execute("SELECT count(*) FROM budgets_reservation WHERE run_id = ?", (uuid.UUID(run_id).hex,))
        reserved = db.execute("SELECT coalesce(sum(reserved), 0) FROM budgets_categorymonth").fetchone()[0]
        return int(rows.fetchone()[0]), int(reserved)


def saved_reads(database: Path, run_id: str) -> set[str]:
    """The documents the run's agents had read, as its saved steps say."""
    with sqlite3.connect(database, timeout=10) as db:
        rows = db.execute(
            "SELECT data FROM chat_step WHERE run_id = ? AND kind = 'agent_action'", (uuid.UUID(run_id).hex,)
        ).fetchall()
    return {s["id"] for (data,) in rows for s in json.loads(data)["sources"]}


def run_row(database: Path, run_id: str) -> tuple[str, dict[str, Any]]:
    """The run's status and its last step's data."""
    with sqlite3.connect(database, timeout=10) as db:
        status = db.execute("SELECT status FROM chat_run WHERE id = ?", (uuid.UUID(run_id).hex,)).fetchone()[0]
        last = db.execute(
            "SELECT data FROM chat_step WHERE run_id = ? ORDER BY seq DESC LIMIT 1", (uuid.UUID(run_id).hex,)
        ).fetchone()[0]
    return str(status), json.loads(last)


def test_a_server_killed_mid_run_leaves_no_run_running_and_no_reservation_held(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    key_path = tmp_path / "key.json"
    run_id = ""
    with start_server(SERVER, tmp_path, str(key_path), **SLOW) as first:
        first.wait_until_up()
        client = openai.OpenAI(base_url=f"{first.url}/v1", api_key=json.loads(key_path.read_text()), max_retries=0)
        stream = client.chat.completions.create(
            model="demo-large", messages=[{"role": "user", "content": QUESTION}], extra_body=DELEGATING, stream=True
        )
        try:
            for chunk in stream:
                run_id = run_id or (chunk.model_extra or {}).get("run_id", "")
                event = (chunk.model_extra or {}).get("event") or {}
                if event.get("type") == "agent_action" and (event["step"].get("action") or {}).get("kind") == "read":
                    break  # an agent has read: its step is saved within a moment, its next model call holds tokens
            wait_until(
                lambda: saved_reads(database, run_id) and held(database, run_id)[0] > 0,
                "a saved read and a model call holding tokens",
            )
            read = saved_reads(database, run_id)
            first.process.kill()  # kill -9, mid-call
            first.process.wait(timeout=10)
        finally:
            stream.close()
            client.close()
        assert first.process.returncode == -9
    assert run_id and read, "the kill came after an agent had read"
    status, _ = run_row(database, run_id)
    assert status == "running" and held(database, run_id)[0] > 0, "the dead server left its run and its hold"

    with start_server(SERVER, tmp_path, **SLOW) as second:
        second.wait_until_up()
        key = json.loads(key_path.read_text())
        with httpx2.Client(base_url=second.url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            run = http.get(f"/v1/runs/{run_id}").json()
    assert run["status"] == "error" and run["finished"]
    assert run["reason"].startswith("The server stopped while this answer was being written")
    _, last = run_row(database, run_id)
    assert last["cause"]["code"] == "server_stopped"  # why, as data: each page words it in its reader's language
    # Its findings: what its agents had read counts among its sources, and their steps are kept.
    assert read <= {s["id"] for s in run["sources"]}
    agents = [s["agent"] for s in run["steps"] if s["type"] == "run_agent"]
    assert agents and any(a["steps"] for a in agents)
    assert held(database, run_id) == (0, 0), "nothing is held on the category any more"
