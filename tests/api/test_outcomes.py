"""A run that fails, through the official ``openai`` client in this process (the ASGI app behind
httpx's ASGI transport, the run executed in the test's event loop): an error to the client (an HTTP error, or an
error event in the stream) whose object says that the run failed and why, as ``GET /v1/runs/{id}`` does. The main
model is the only fake: it fails as a provider refusing the key does (``tests/providers/test_openai_clients.py``
has every row of the mapping with a provider's wire server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest
from asgiref.sync import sync_to_async
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

from assistant.catalogue import snapshot
from assistant.engine.errors import AuthenticationFailed
from assistant.engine.models.base import Model
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.types import ModelRequest, ModelResponse
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs.models import Run
from tests.asgi_app import asgi_transport

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = "the provider refused the key"
REASON = f"The model could not answer: {REFUSED}"
QUESTION: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Bimbamjob: which invoices are unpaid?"}]


def refusing(request: ModelRequest, info: CallInfo) -> ModelResponse:
    raise AuthenticationFailed(REFUSED)


@pytest.fixture
def failing_main_model(demo_data: None, fast_demo: None, monkeypatch: pytest.MonkeyPatch) -> None:
    real = snapshot.resolve

    def resolve(model_id: str) -> Model:
        if model_id == "demo-large":
            return FunctionModel(refusing, snapshot.catalogue()[model_id])
        return real(model_id)

    monkeypatch.setattr(snapshot, "resolve", resolve)


@pytest.fixture
async def client(failing_main_model: None) -> AsyncIterator[openai.AsyncOpenAI]:
    org = await Organisation.objects.aget(slug="demo")
    _, secret = await sync_to_async(keys.create_key)(org, "outcomes")
    http = httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=30)
    async with openai.AsyncOpenAI(
        base_url="http://testserver/v1", api_key=secret, http_client=http, max_retries=0
    ) as client:
        yield client


async def _run_says(client: openai.AsyncOpenAI, run_id: str) -> dict[str, Any]:
    response = await client.get(f"/runs/{run_id}", cast_to=httpx2.Response)
    run: dict[str, Any] = response.json()
    return run


async def test_a_failed_run_is_an_error_that_says_why_with_the_run(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as raised:
        await client.chat.completions.create(model="demo-large", messages=QUESTION)
    e = raised.value
    assert e.status_code == 502 and e.code == "upstream_auth" and e.message.endswith(REASON)
    body = e.body
    assert isinstance(body, dict) and body["status"] == "error" and body["reason_code"] == "model_error"

    run = await _run_says(client, body["run_id"])
    assert run["status"] == "error" and run["reason"] == REASON and run["finished"]
    assert run["reason_code"] == "model_error"
    assert (await Run.objects.aget(pk=body["run_id"])).status == "error"


async def test_a_failed_run_streamed_ends_with_an_error_event(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(model="demo-large", messages=QUESTION, stream=True)
    chunks: list[dict[str, Any]] = []
    with pytest.raises(openai.APIError) as raised:
        async for chunk in stream:  # a stream: stream=True
            ChatCompletionChunk.model_validate(chunk.model_dump())
            chunks.append(chunk.model_extra or {})
    assert raised.value.code == "upstream_auth" and raised.value.message == REASON
    body = raised.value.body
    assert isinstance(body, dict) and body["run_id"] == chunks[0]["run_id"]

    run = await _run_says(client, body["run_id"])
    assert run["status"] == "error" and run["reason"] == REASON
