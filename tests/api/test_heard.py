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

from assistant.api import completions as api_module
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs import steps
from tests.api.api_support import asgi_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    # The in-memory layer's queues belong to the event loop that made them: one per test.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


QUESTION = "Bimbamjob: invoicing 2024, payment follow-up, commercial relationship. Conclude on the risk."


async def _ask(key_name: str, **body: Any) -> httpx2.Response:
    """The question to the API, with a new key of the demo organisation, as a client sends it (``body``: what it adds)."""
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    _, secret = await sync_to_async(keys.create_key)(org, key_name)
    async with asgi_client(secret) as client:
        question = [{"role": "user", "content": QUESTION}]
        sent = {"model": "demo-large", "messages": question, "reasoning_level": "approfondi", **body}
        return await client.post("/v1/chat/completions", json=sent)


async def test_a_response_not_streamed_is_built_from_the_events_heard_as_the_steps_would_build_it(
    fast_demo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_back: list[Any] = []
    events_of = steps.events_of  # the one the API module imports

    def counted(*args: Any, **kwargs: Any) -> Any:
        read_back.append(args)
        return events_of(*args, **kwargs)

    monkeypatch.setattr(api_module, "events_of", counted)
    response = await _ask("heard", tools_enabled=["kb:factures", "kb:comptes-rendus", "agents"])
    assert response.status_code == 200
    heard = response.json()
    assert heard["status"] == "ok" and [s for s in heard["steps"] if s["type"] == "run_agent"]
    assert read_back == []  # executed here: its steps were not read back
    # Built from the steps, the same response.
    from_steps = (await sync_to_async(api_module._completion)(uuid.UUID(heard["run_id"]), []))[0].model_dump(
        mode="json"
    )
    assert len(read_back) == 1
    assert from_steps == heard


async def test_a_streams_last_chunk_is_built_from_the_run_as_this_process_saved_its_end(
    fast_demo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streamed, the last chunk is built from the run's end as this process saved it, in the event loop, not handed to
    the database's thread (a database read there would fail the stream): the same figures as the run read back."""
    import json

    handed: list[str] = []
    real = sync_to_async  # the one the API module imports

    def recording(func: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(getattr(func, "__name__", ""))
        return real(func, *args, **kwargs)

    monkeypatch.setattr(api_module, "sync_to_async", recording)
    response = await _ask("heard-stream", tools_enabled=["kb:factures", "agents"], stream=True)
    assert response.status_code == 200
    chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    last = chunks[-1]
    assert last["status"] == "ok" and response.text.rstrip().endswith("data: [DONE]")
    assert "create_run" in handed and "_completion" not in handed
    from_db, _failure = await sync_to_async(api_module._completion)(uuid.UUID(last["run_id"]), [])
    expected = from_db.model_dump(mode="json", include={"usage", "steps", "rounds", "sources", "status", "reason"})
    assert {k: last[k] for k in expected} == expected
