"""Every refusal with its status code in OpenAI's error shape, as the official client raises it;
keys confined to their organisation and to their models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import openai
import pytest

from tests.api.api_support import Live

pytestmark = pytest.mark.slow

ASK: list[Any] = [{"role": "user", "content": "Which invoices of Bimbamjob are unpaid?"}]


def refused(live: Live, error: type[openai.APIStatusError], key: str = "demo", **request: Any) -> openai.APIStatusError:
    """The client's exception for a request; the body is OpenAI's error object."""
    arguments: dict[str, Any] = {"model": "demo-large", "messages": ASK} | request
    with pytest.raises(error) as caught:
        live.client(key).chat.completions.create(**arguments)
    e = caught.value
    assert isinstance(e.body, dict) and set(e.body) >= {"message", "type", "param", "code"}
    assert e.message and e.code
    return e


def test_a_bad_key_gets_401(live: Live) -> None:
    e = refused(live, openai.AuthenticationError, key="sk-org-not-a-key")
    assert e.status_code == 401 and e.code == "invalid_api_key"
    response = live.http("").get("/v1/models")
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"


def test_a_revoked_key_gets_401(live: Live) -> None:
    e = refused(live, openai.AuthenticationError, key="revoked")
    assert e.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        live.client("revoked").models.list()


def test_a_model_the_key_may_not_use_gets_403(live: Live) -> None:
    e = refused(live, openai.PermissionDeniedError, key="small", model="demo-large")
    assert e.status_code == 403 and e.code == "model_not_allowed" and e.param == "model"
    assert "demo-small" in e.message


def test_an_unknown_model_gets_404(live: Live) -> None:
    e = refused(live, openai.NotFoundError, model="gpt-nonexistent")
    assert e.code == "model_not_found"


def test_an_unknown_knowledge_base_gets_404(live: Live) -> None:
    e = refused(live, openai.NotFoundError, extra_body={"tools_enabled": ["kb:nowhere", "agents"]})
    assert e.status_code == 404 and e.code == "knowledge_base_not_found" and e.param == "tools_enabled"


def test_another_organisations_knowledge_base_gets_404(live: Live) -> None:
    """The other organisation has ``secrets``; the demo's key does not see it (nor the other's ``factures``)."""
    e = refused(live, openai.NotFoundError, extra_body={"tools_enabled": ["kb:secrets"]})
    assert "secrets" in e.message
    # The other organisation's key reads its own base, never the demo's documents.
    completion = live.client("other").chat.completions.create(
        model="demo-small", messages=ASK, extra_body={"tools_enabled": ["kb:factures"]}
    )
    data = completion.model_dump()
    assert data["status"] == "ok"
    assert {s["title"] for s in data["sources"]} == {"Vault"}
    refused(live, openai.NotFoundError, key="other", model="demo-small", extra_body={"tools_enabled": ["kb:contrats"]})


def test_agents_without_another_resource_gets_400(live: Live) -> None:
    e = refused(live, openai.BadRequestError, extra_body={"tools_enabled": ["agents"]})
    assert e.status_code == 400 and e.code == "agents_without_resource"


def test_an_unknown_category_gets_400(live: Live) -> None:
    e = refused(live, openai.BadRequestError, extra_body={"category": "nope"})
    assert e.code == "unknown_category" and e.param == "category"


def test_an_exhausted_category_gets_429_with_when_it_resets(live: Live) -> None:
    e = refused(live, openai.RateLimitError, extra_body={"category": "tiny"})
    assert e.status_code == 429 and e.code == "category_budget_exhausted"
    assert "Tiny" in e.message and "resets" in e.message
    assert isinstance(e.body, dict)  # OpenAI's error object (the SDK types a body as object)
    resets_at = datetime.fromisoformat(e.body["resets_at"])
    assert resets_at > datetime.now(resets_at.tzinfo)
    assert int(e.response.headers["retry-after"]) > 0
    assert e.response.headers["x-should-retry"] == "false"


@pytest.mark.parametrize(
    ("request_body", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "assistant", "content": "Hi"}]}, None),
        ({"messages": [{"role": "robot", "content": "Hi"}]}, "messages[0].role"),
        ({"extra_body": {"tools_enabled": ["kb:factures", "mail"]}}, "tools_enabled"),
        ({"extra_body": {"reasoning_level": "turbo"}}, "reasoning_level"),
        # NUL is no text: refused where it is, never a 500 on PostgreSQL (tests/api/test_bad_bodies.py has more).
        ({"messages": [{"role": "user", "content": "\x00\x00"}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "\x00"}]}]},
            "messages[0].content[0].text",
        ),
        ({"extra_body": {"stream": "yes"}}, "stream"),
        ({"extra_body": {"category": "catalogue\x00"}}, "category"),
    ],
)
def test_an_invalid_body_gets_400(live: Live, request_body: dict[str, Any], param: str | None) -> None:
    e = refused(live, openai.BadRequestError, **request_body)
    assert e.status_code == 400 and e.code == "invalid_body"
    if param is not None:
        assert e.param == param


def test_a_body_that_is_not_json_gets_an_error_in_openai_shape(live: Live) -> None:
    response = live.http().post(
        "/v1/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert set(response.json()["error"]) >= {"message", "type", "param", "code"}


def test_a_wrong_method_gets_a_json_405(live: Live) -> None:
    response = live.http().get("/v1/chat/completions")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_level_is_named_in_any_case(live: Live) -> None:
    for name in ("Approfondi", "APPROFONDI", "deep"):
        completion = live.client().chat.completions.create(
            model="demo-small", messages=ASK, extra_body={"reasoning_level": name}
        )
        run = live.http().get(f"/v1/runs/{completion.model_dump()['run_id']}").json()
        assert run["reasoning_level"] == "approfondi"


def test_models_are_those_the_key_may_use(live: Live) -> None:
    assert [m.id for m in live.client("small").models.list()] == ["demo-small"]
    # A key with no restriction keeps the whole catalogue, even where the assistant is restricted.
    assert {m.id for m in live.client("other").models.list()} == {"demo-large", "demo-small"}
    assert {m.id for m in live.client().models.list()} == {"demo-large", "demo-small"}
    model = live.client("small").models.retrieve("demo-small")
    assert model.owned_by == "demo" and (model.model_extra or {})["output_price_eur"] > 0
    assert (model.model_extra or {})["price_date"] == "2025-12-01"  # when the catalogue recorded its prices
    with pytest.raises(openai.NotFoundError):
        live.client("small").models.retrieve("demo-large")


def test_a_restricted_key_runs_its_model_and_its_agents_stay_within_it(live: Live) -> None:
    completion = live.client("small").chat.completions.create(
        model="demo-small", messages=ASK, extra_body={"tools_enabled": ["kb:factures", "agents"]}
    )
    data = completion.model_dump()
    assert data["status"] == "ok"
    assert set(data["usage"]["by_model"]) == {"demo-small"}


def test_runs_are_confined_to_the_keys_organisation(live: Live) -> None:
    completion = live.client().chat.completions.create(model="demo-small", messages=ASK)
    run_id = completion.model_dump()["run_id"]
    assert live.http("small").get(f"/v1/runs/{run_id}").status_code == 200  # another key of the same organisation
    for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/cancel"):
        method = "POST" if path.endswith("cancel") else "GET"
        response = live.http("other").request(method, path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "run_not_found"
    assert live.http().get("/v1/runs/not-a-run").status_code == 404
    assert live.http().get("/v1/runs/00000000-0000-0000-0000-000000000000").status_code == 404


def test_the_openapi_document_is_served(live: Live) -> None:
    anonymous = live.http("")
    document = anonymous.get("/v1/openapi.json").json()
    assert {"/v1/chat/completions", "/v1/models", "/v1/runs/{run_id}", "/v1/runs/{run_id}/cancel"} <= set(
        document["paths"]
    )
    schemas = document["components"]["schemas"]
    assert {"steps", "usage", "rounds", "sources", "run_id", "status", "reason"} <= set(
        schemas["ChatCompletion"]["properties"]
    )
    # OpenAI's finish reason only; the run's outcome is the extension `status`, named as the run's.
    assert set(schemas["Choice"]["properties"]["finish_reason"]["enum"]) == {
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "function_call",
    }
    assert schemas["ChatCompletion"]["properties"]["status"]["enum"] == ["ok", "stopped", "error"]
    assert set(schemas["RunOut"]["properties"]["status"]["enum"]) == {"running", "ok", "stopped", "error"}
    assert {"tools_enabled", "reasoning_level", "category"} <= set(schemas["ChatCompletionRequest"]["properties"])
    assert {"model", "status", "rounds", "seconds", "cost_eur", "steps"} <= set(schemas["AgentOut"]["properties"])
    assert set(document["paths"]["/v1/chat/completions"]["post"]["responses"]) >= {
        "200",
        "400",
        "401",
        "403",
        "404",
        "413",
        "429",
    }
    assert anonymous.get("/v1/docs").status_code == 200


def test_agents_off_at_the_level_are_said_not_dropped_silently(live: Live) -> None:
    client = live.client()
    extensions = {"tools_enabled": ["kb:factures", "agents"], "reasoning_level": "Rapide"}
    data = client.chat.completions.create(model="demo-large", messages=ASK, extra_body=extensions).model_dump()
    assert data["status"] == "ok"
    (warning,) = data["warnings"]
    assert warning["code"] == "agents_off_at_level" and warning["param"] == "tools_enabled"
    assert "Rapide" in warning["message"] and "0" in warning["message"]
    assert not [s for s in data["steps"] if s["type"] == "run_agent"]
    # Streamed: in the first chunk, and again with the end.
    chunks = list(client.chat.completions.create(model="demo-large", messages=ASK, extra_body=extensions, stream=True))
    assert (chunks[0].model_extra or {})["warnings"][0]["code"] == "agents_off_at_level"
    assert (chunks[-1].model_extra or {})["warnings"][0]["code"] == "agents_off_at_level"
    # No model cheap enough to delegate to: said too.
    small = client.chat.completions.create(
        model="demo-small", messages=ASK, extra_body={**extensions, "reasoning_level": "approfondi"}
    )
    assert [w["code"] for w in small.model_dump()["warnings"]] == ["agents_without_cheaper_model"]
    # Where agents work, no warning.
    deep = client.chat.completions.create(
        model="demo-large", messages=ASK, extra_body={**extensions, "reasoning_level": "approfondi"}
    ).model_dump()
    assert deep["warnings"] == [] and [s for s in deep["steps"] if s["type"] == "run_agent"]
