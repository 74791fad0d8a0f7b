"""A client that goes away stops its run, as Stop does (what LibreChat's and Open WebUI's Stop do: close the
stream), unless it asked for ``"background": true``; through a real server (daphne), whose connection the client
really closes."""

from __future__ import annotations

import sqlite3
from typing import Any

import openai
import pytest

from tests.api.api_support import Live
from tests.waiting import wait_until

# Agents at Approfondi: about a second of work, time for the client to leave mid-way.
EXTENSIONS = {"tools_enabled": ["kb:factures", "kb:comptes-rendus", "agents"], "reasoning_level": "approfondi"}
ASK: Any = [{"role": "user", "content": "Bimbamjob: invoicing 2024, payment follow-up. Conclude on the risk."}]


def ended(live: Live, run_id: str) -> dict[str, Any]:
    """The run once it has ended (it ends on its own or by a stop), as ``GET /v1/runs/{id}`` gives it; waited for in
    the server's database, not through the API, whose key has a rate limit the other tests share."""
    database = live.database
    assert database is not None

    def status() -> str:
        with sqlite3.connect(database, timeout=10) as db:
            (found,) = db.execute("SELECT status FROM chat_run WHERE id = ?", [run_id.replace("-", "")]).fetchone()
        return str(found)

    wait_until(lambda: status() != "running", f"run {run_id} to end")
    run: dict[str, Any] = live.http().get(f"/v1/runs/{run_id}").json()
    return run


def started(live: Live, **extra: Any) -> tuple[openai.Stream[Any], str]:
    stream = live.client().chat.completions.create(
        model="demo-large", messages=ASK, stream=True, extra_body={**EXTENSIONS, **extra}
    )
    first = next(iter(stream))
    return stream, (first.model_extra or {})["run_id"]


def test_a_closed_stream_stops_its_run_as_stop_does(live: Live) -> None:
    stream, run_id = started(live)
    stream.close()  # the connection closed, as a front end's Stop does
    run = ended(live, run_id)
    assert run["status"] == "stopped" and run["reason_code"] == "stopped_by_user" and run["stop_requested"]
    assert run["usage"]["cost_eur"] >= 0  # billed what was served


def test_a_background_run_goes_on_when_its_stream_closes(live: Live) -> None:
    stream, run_id = started(live, background=True)
    stream.close()
    run = ended(live, run_id)
    assert run["status"] == "ok" and not run["stop_requested"] and run["answer"]


def test_a_client_gone_before_the_answer_not_streamed_stops_its_run(live: Live) -> None:
    impatient = openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.keys["demo"], max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(model="demo-large", messages=ASK, extra_body=EXTENSIONS)
    impatient.close()
    assert live.database is not None
    with sqlite3.connect(live.database, timeout=10) as db:
        (run_id,) = db.execute("SELECT id FROM chat_run ORDER BY created DESC LIMIT 1").fetchone()
    run = ended(live, str(run_id))
    assert run["status"] == "stopped" and run["reason_code"] == "stopped_by_user"
