"""A response not streamed is built from the run's events as this process executed it (``runs.execution.Heard``),
not from its steps read back: the same response as from the steps, which are read only for a run executed
elsewhere."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.core.management import call_command
from django.db.models import Model

from assistant.api import completions as api_module
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs.models import Run, Step
from tests.api.api_support import asgi_client
from tests.query_log import every_query

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    # The in-memory layer's queues belong to the event loop that made them: one per test.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


QUESTION = "Bimbamjob: invoicing 2024, payment follow-up, commercial relationship. Conclude on the risk."


async def _key(name: str) -> str:
    """A new key of the demo organisation (the demo loaded first)."""
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    return (await sync_to_async(keys.create_key)(org, name))[1]


async def _ask(secret: str, **body: Any) -> httpx2.Response:
    """The question to the API, as a client sends it (``body``: what it adds)."""
    async with asgi_client(secret) as client:
        question = [{"role": "user", "content": QUESTION}]
        sent = {"model": "demo-large", "messages": question, "reasoning_level": "approfondi", **body}
        return await client.post("/v1/chat/completions", json=sent)


def _read_back(sent: list[str], run_id: str, *models: type[Model]) -> list[str]:
    """The statements that read the run (its row or its steps: ``models``) back, any thread's (the request's, the
    run's)."""
    run = uuid.UUID(run_id)
    tables = [f'FROM "{m._meta.db_table}"' for m in models]
    return [
        q for q in sent if q.startswith("SELECT") and any(t in q for t in tables) and (run.hex in q or str(run) in q)
    ]


async def test_a_response_not_streamed_is_built_from_the_events_heard_as_the_steps_would_build_it(
    fast_demo: None,
) -> None:
    secret = await _key("heard")
    with every_query() as sent:
        response = await _ask(secret, tools_enabled=["kb:factures", "kb:comptes-rendus", "agents"])
    assert response.status_code == 200
    heard = response.json()
    assert heard["status"] == "ok" and [s for s in heard["steps"] if s["type"] == "run_agent"]
    assert _read_back(sent, heard["run_id"], Run, Step) == []  # executed here: nothing of it was read back
    # Built from the steps, the same response.
    with every_query() as sent:
        from_steps = (await sync_to_async(api_module._completion)(uuid.UUID(heard["run_id"]), []))[0]
    assert len(_read_back(sent, heard["run_id"], Step)) == 1
    assert from_steps.model_dump(mode="json") == heard


async def test_a_streams_last_chunk_is_built_from_the_run_as_this_process_saved_its_end(fast_demo: None) -> None:
    """Streamed, the last chunk is built from the run's end as this process saved it, in the event loop: nothing of the
    run is read back from the database (a database read there would fail the stream); the same figures as the run
    read back."""
    import json

    secret = await _key("heard-stream")
    with every_query() as sent:
        response = await _ask(secret, tools_enabled=["kb:factures", "agents"], stream=True)
    assert response.status_code == 200
    chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    last = chunks[-1]
    assert last["status"] == "ok" and response.text.rstrip().endswith("data: [DONE]")
    assert _read_back(sent, last["run_id"], Run, Step) == []  # nothing of the run read back
    from_db, _failure = await sync_to_async(api_module._completion)(uuid.UUID(last["run_id"]), [])
    expected = from_db.model_dump(mode="json", include={"usage", "steps", "rounds", "sources", "status", "reason"})
    assert {k: last[k] for k in expected} == expected
