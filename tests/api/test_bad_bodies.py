"""A corpus of bad requests: each gets its status in OpenAI's error shape, never a 500, and nothing is saved or billed.

In process (Django's test client through the whole middleware stack), so that the database can be
checked after each refusal: no run, no conversation, no message, no category tokens used or held.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from pytest_django import Settings

from assistant.api.errors import CODES
from assistant.budgets.models import Category, CategoryMonth
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs.models import Conversation, Message, Run

ASK = [{"role": "user", "content": "Which invoices of Bimbamjob are unpaid?"}]
COMPLETIONS = "/v1/chat/completions"
KEY = "demo"  # replaced by the fixture's key
RUN = "/v1/runs/00000000-0000-0000-0000-000000000000"


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "demo-large", "messages": ASK, **fields}


def said(text: str) -> dict[str, Any]:
    return body(messages=[{"role": "user", "content": text}])


MANY = [{"role": "user", "content": "hi"}] * 501

# (id, method, path, body: bytes, a JSON value or None, key: "demo", "none", "bad" or "revoked", status, code, param)
CASES: list[tuple[str, str, str, Any, str, int, str | None, str | None]] = [
    ("not json", "POST", COMPLETIONS, b"{not json", "demo", 400, "invalid_json", None),
    (
        "truncated json",
        "POST",
        COMPLETIONS,
        b'{"model": "demo-large", "messages": [',
        "demo",
        400,
        "invalid_json",
        None,
    ),
    ("empty body", "POST", COMPLETIONS, b"", "demo", 400, "invalid_body", None),
    ("json array", "POST", COMPLETIONS, [], "demo", 400, "invalid_body", None),
    ("json string", "POST", COMPLETIONS, "hello", "demo", 400, "invalid_body", None),
    ("json null", "POST", COMPLETIONS, None, "demo", 400, "invalid_body", None),
    ("not utf-8", "POST", COMPLETIONS, b'{"model": "\xff\xfe"}', "demo", 400, None, None),
    ("deeply nested", "POST", COMPLETIONS, b"[" * 100_000 + b"]" * 100_000, "demo", 400, "invalid_json", None),
    (
        "NaN stream",
        "POST",
        COMPLETIONS,
        b'{"model": "demo-large", "messages": [], "stream": NaN}',
        "demo",
        400,
        None,
        None,
    ),
    ("no model", "POST", COMPLETIONS, {"messages": ASK}, "demo", 400, "invalid_body", "model"),
    ("model a number", "POST", COMPLETIONS, body(model=5), "demo", 400, "invalid_body", "model"),
    ("model a list", "POST", COMPLETIONS, body(model=["demo-large"]), "demo", 400, "invalid_body", "model"),
    ("model too long", "POST", COMPLETIONS, body(model="m" * 1000), "demo", 400, "invalid_body", "model"),
    ("unknown model", "POST", COMPLETIONS, body(model="gpt-nonexistent"), "demo", 404, "model_not_found", "model"),
    ("no messages", "POST", COMPLETIONS, {"model": "demo-large"}, "demo", 400, "invalid_body", "messages"),
    ("empty messages", "POST", COMPLETIONS, body(messages=[]), "demo", 400, "invalid_body", "messages"),
    ("messages an object", "POST", COMPLETIONS, body(messages={"a": 1}), "demo", 400, "invalid_body", "messages"),
    ("messages a string", "POST", COMPLETIONS, body(messages="hi"), "demo", 400, "invalid_body", "messages"),
    ("a message a string", "POST", COMPLETIONS, body(messages=["hi"]), "demo", 400, "invalid_body", "messages[0]"),
    (
        "bad role",
        "POST",
        COMPLETIONS,
        body(messages=[{"role": "robot", "content": "Hi"}]),
        "demo",
        400,
        "invalid_body",
        "messages[0].role",
    ),
    (
        "a tool result answering no call",
        "POST",
        COMPLETIONS,
        body(messages=[{"role": "tool", "content": "Hi", "tool_call_id": "x"}, *ASK]),
        "demo",
        400,
        "invalid_body",
        "messages",
    ),
    (
        "no role",
        "POST",
        COMPLETIONS,
        body(messages=[{"content": "Hi"}]),
        "demo",
        400,
        "invalid_body",
        "messages[0].role",
    ),
    (
        "content a number",
        "POST",
        COMPLETIONS,
        body(messages=[{"role": "user", "content": 42}]),
        "demo",
        400,
        "invalid_body",
        "messages[0].content",
    ),
    (
        "content an image",
        "POST",
        COMPLETIONS,
        body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
        "demo",
        400,
        "invalid_body",
        "messages[0].content[0].type",
    ),
    (
        "ends with the assistant",
        "POST",
        COMPLETIONS,
        body(messages=[*ASK, {"role": "assistant", "content": "Hi"}]),
        "demo",
        400,
        "invalid_body",
        "messages",
    ),
    ("empty question", "POST", COMPLETIONS, said("   "), "demo", 400, "invalid_body", "messages"),
    ("lone surrogate", "POST", COMPLETIONS, said("caf\ud800"), "demo", 400, "invalid_body", "messages[0].content"),
    (
        "lone surrogate in the fourth message",
        "POST",
        COMPLETIONS,
        body(messages=[*ASK, {"role": "assistant", "content": "ok"}, *ASK, {"role": "user", "content": "\udfff"}]),
        "demo",
        400,
        "invalid_body",
        "messages[3].content",
    ),
    ("NUL", "POST", COMPLETIONS, said("a\x00b"), "demo", 400, "invalid_body", "messages[0].content"),
    ("NULs only", "POST", COMPLETIONS, said("\x00\x00"), "demo", 400, "invalid_body", "messages[0].content"),
    ("escape character", "POST", COMPLETIONS, said("a\x1b[31mb"), "demo", 400, "invalid_body", "messages[0].content"),
    ("C1 control", "POST", COMPLETIONS, said("a\x85b"), "demo", 400, "invalid_body", "messages[0].content"),
    (
        "control in a text part",
        "POST",
        COMPLETIONS,
        body(messages=[{"role": "user", "content": [{"type": "text", "text": "\x07"}]}]),
        "demo",
        400,
        "invalid_body",
        "messages[0].content[0].text",
    ),
    ("too many messages", "POST", COMPLETIONS, body(messages=MANY), "demo", 400, "invalid_body", "messages"),
    ("stream a string", "POST", COMPLETIONS, body(stream="yes"), "demo", 400, "invalid_body", "stream"),
    ("stream 'true'", "POST", COMPLETIONS, body(stream="true"), "demo", 400, "invalid_body", "stream"),
    ("stream a number", "POST", COMPLETIONS, body(stream=1), "demo", 400, "invalid_body", "stream"),
    ("stream null", "POST", COMPLETIONS, body(stream=None), "demo", 400, "invalid_body", "stream"),
    ("bad level", "POST", COMPLETIONS, body(reasoning_level="turbo"), "demo", 400, "invalid_body", "reasoning_level"),
    ("level a number", "POST", COMPLETIONS, body(reasoning_level=3), "demo", 400, "invalid_body", "reasoning_level"),
    ("tools_enabled a string", "POST", COMPLETIONS, body(tools_enabled="web"), "demo", 400, "invalid_body", None),
    (
        "unknown resource",
        "POST",
        COMPLETIONS,
        body(tools_enabled=["kb:factures", "mail"]),
        "demo",
        400,
        "invalid_body",
        "tools_enabled",
    ),
    ("resource a number", "POST", COMPLETIONS, body(tools_enabled=[1]), "demo", 400, "invalid_body", None),
    ("empty kb slug", "POST", COMPLETIONS, body(tools_enabled=["kb:"]), "demo", 400, "invalid_body", "tools_enabled"),
    (
        "resource with a surrogate",
        "POST",
        COMPLETIONS,
        body(tools_enabled=["kb:\ud800"]),
        "demo",
        400,
        "invalid_body",
        "tools_enabled",
    ),
    (
        "agents alone",
        "POST",
        COMPLETIONS,
        body(tools_enabled=["agents"]),
        "demo",
        400,
        "agents_without_resource",
        "tools_enabled",
    ),
    (
        "unknown kb",
        "POST",
        COMPLETIONS,
        body(tools_enabled=["kb:nowhere"]),
        "demo",
        404,
        "knowledge_base_not_found",
        "tools_enabled",
    ),
    ("web not set up", "POST", COMPLETIONS, body(tools_enabled=["web"]), "demo", 400, "resource_unavailable", None),
    ("code not set up", "POST", COMPLETIONS, body(tools_enabled=["code"]), "demo", 400, "resource_unavailable", None),
    ("category a number", "POST", COMPLETIONS, body(category=7), "demo", 400, "invalid_body", "category"),
    ("category with NUL", "POST", COMPLETIONS, body(category="catalogue\x00"), "demo", 400, "invalid_body", "category"),
    ("unknown category", "POST", COMPLETIONS, body(category="nope"), "demo", 400, "unknown_category", "category"),
    (
        "spent category",
        "POST",
        COMPLETIONS,
        body(category="tiny"),
        "demo",
        429,
        "category_budget_exhausted",
        "category",
    ),
    ("no key", "POST", COMPLETIONS, body(), "none", 401, "invalid_api_key", None),
    ("unknown key", "POST", COMPLETIONS, body(), "bad", 401, "invalid_api_key", None),
    ("revoked key", "POST", COMPLETIONS, body(), "revoked", 401, "invalid_api_key", None),
    ("no key on models", "GET", "/v1/models", None, "none", 401, "invalid_api_key", None),
    ("model the key may not use", "POST", COMPLETIONS, body(), "small", 403, "model_not_allowed", "model"),
    ("GET completions", "GET", COMPLETIONS, None, "demo", 405, "method_not_allowed", None),
    ("PUT completions", "PUT", COMPLETIONS, body(), "demo", 405, "method_not_allowed", None),
    ("DELETE completions", "DELETE", COMPLETIONS, None, "demo", 405, "method_not_allowed", None),
    ("POST models", "POST", "/v1/models", {}, "demo", 405, "method_not_allowed", None),
    ("DELETE a model", "DELETE", "/v1/models/demo-large", None, "demo", 405, "method_not_allowed", None),
    ("POST a run", "POST", RUN, {}, "demo", 405, "method_not_allowed", None),
    ("GET cancel", "GET", RUN + "/cancel", None, "demo", 405, "method_not_allowed", None),
    ("unknown model id", "GET", "/v1/models/nope", None, "demo", 404, "model_not_found", "model"),
    ("run id not a uuid", "GET", "/v1/runs/not-a-run", None, "demo", 404, "run_not_found", "run_id"),
    (
        "unknown run id",
        "GET",
        "/v1/runs/00000000-0000-0000-0000-000000000000",
        None,
        "demo",
        404,
        "run_not_found",
        None,
    ),
    ("run id with quotes", "GET", "/v1/runs/%22%3B--", None, "demo", 404, "run_not_found", None),
    ("run id huge", "GET", "/v1/runs/" + "9" * 3000, None, "demo", 404, "run_not_found", None),
    ("cancel an unknown run", "POST", "/v1/runs/nope/cancel", None, "demo", 404, "run_not_found", None),
    ("unknown endpoint", "GET", "/v1/nothing", None, "demo", 404, "not_found", None),
    ("unknown endpoint POST", "POST", "/v1/completions", body(), "demo", 404, "not_found", None),
]


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    """Counters kept in the cache (a key's requests per minute, bad keys per address) start afresh: key ids
    come back after each test's rollback, and this corpus sends many requests within a minute."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def made(demo_data: None) -> dict[str, str]:
    demo = Organisation.objects.get(slug="demo")
    Category.objects.create(organisation=demo, slug="tiny", name="Tiny", monthly_tokens=1, position=9)
    revoked, revoked_secret = keys.create_key(demo, "revoked")
    keys.revoke(revoked)
    return {
        "demo": keys.create_key(demo, "all models")[1],
        "small": keys.create_key(demo, "small only", ["demo-small"])[1],
        "revoked": revoked_secret,
        "bad": "sk-org-not-a-key",
    }


def _nothing_saved() -> tuple[int, ...]:
    return (
        Run.objects.count(),
        Conversation.objects.count(),
        Message.objects.count(),
        sum(CategoryMonth.objects.values_list("used", flat=True)),
        sum(CategoryMonth.objects.values_list("reserved", flat=True)),
    )


def send(client: Client, method: str, path: str, payload: Any, key: str | None) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    if isinstance(payload, bytes):
        data: bytes | str | None = payload
    elif payload is None and method in ("GET", "DELETE"):
        data = None
    else:
        data = json.dumps(payload)
    kwargs: dict[str, Any] = {"content_type": "application/json", **headers}
    if data is not None:
        kwargs["data"] = data
    return client.generic(method, path, **kwargs)


def check_shape(response: Any, status: int, code: str | None, param: str | None) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert error["code"] in CODES and CODES[error["code"]][0] == status
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    assert response["x-should-retry"] == "false"
    return dict(error)


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("method", "path", "payload", "key", "status", "code", "param"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_request_is_refused_in_openai_shape_and_nothing_is_saved(
    made: dict[str, str],
    method: str,
    path: str,
    payload: Any,
    key: str,
    status: int,
    code: str | None,
    param: str | None,
) -> None:
    client = Client()
    before = _nothing_saved()
    error = check_shape(send(client, method, path, payload, made.get(key)), status, code, param)
    assert _nothing_saved() == before
    if status == 405:
        assert method in error["message"]
    if status == 429:
        assert error["resets_at"]


def test_a_body_over_the_limit_is_413(made: dict[str, str], settings: Settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    before = _nothing_saved()
    huge = said("word " * 40_000)
    error = check_shape(send(Client(), "POST", COMPLETIONS, huge, made["demo"]), 413, "body_too_large", None)
    assert "0.095367 MB" in error["message"] or "MB" in error["message"]
    assert _nothing_saved() == before
    # Without a key either: the body is refused before anything reads it.
    check_shape(send(Client(), "POST", COMPLETIONS, huge, None), 413, "body_too_large", None)


def test_the_default_limit_takes_a_long_question_and_refuses_a_huge_one(made: dict[str, str]) -> None:
    limit = 4 * 1024 * 1024
    response = send(Client(), "POST", COMPLETIONS, said("x" * (limit + 1)), made["demo"])
    check_shape(response, 413, "body_too_large", None)


def test_the_message_cap_is_configurable(made: dict[str, str], settings: Settings) -> None:
    settings.API_MAX_MESSAGES = 3
    many = body(messages=[*ASK, {"role": "assistant", "content": "ok"}, *ASK, {"role": "assistant", "content": "ok"}])
    error = check_shape(send(Client(), "POST", COMPLETIONS, many, made["demo"]), 400, "invalid_body", "messages")
    assert "at most 3" in error["message"]


def test_a_wrong_method_names_the_allowed_ones(made: dict[str, str]) -> None:
    response = send(Client(), "GET", COMPLETIONS, None, made["demo"])
    check_shape(response, 405, "method_not_allowed", None)
    assert "POST" in response["Allow"]


def docs_error_table() -> dict[str, tuple[int, str]]:
    """docs/API.md's error table: code -> (status, when)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "API.md").read_text(encoding="utf-8")
    section = page[page.index("**Errors** come in OpenAI's shape") :]
    rows = re.findall(r"^\| (\d{3}) \| `([a-z_]+)` \| (.+) \|$", section.split("\n\n", 2)[1], re.MULTILINE)
    return {code: (int(status), when) for status, code, when in rows}


def test_docs_error_table_is_the_codes_the_api_emits() -> None:
    assert docs_error_table() == CODES


def test_every_code_raised_in_the_api_is_in_the_table() -> None:
    source = "\n".join(p.read_text() for p in (Path(__file__).resolve().parents[2] / "assistant" / "api").glob("*.py"))
    raised = set(re.findall(r"ApiError\(\s*\d{3},\s*\"([a-z_]+)\"", source))
    assert raised and raised <= set(CODES)
    for status, code in re.findall(r"ApiError\(\s*(\d{3}),\s*\"([a-z_]+)\"", source):
        assert CODES[code][0] == int(status), code


def test_twenty_thousand_tiny_messages_are_refused_at_once(made: dict[str, str]) -> None:
    many = body(messages=[{"role": "user", "content": "hi"}] * 20_000)
    error = check_shape(send(Client(), "POST", COMPLETIONS, many, made["demo"]), 400, "invalid_body", "messages")
    assert "20000 messages: at most 500" in error["message"]
    assert not Message.objects.exists()
