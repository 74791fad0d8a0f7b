"""Category budgets through the API: the first call is reserved at intake, before any response starts, streamed or
not, so a request its category cannot take is a 429 (never a 200 ``stopped``), with its real share and when to retry.

The organisation ``budgeted`` has one category, “Synthèses”, of 16,000 tokens of which 2,318 are used: room for three
plain requests to demo-small at once (each holds its prompt and 4,096 tokens of output until it settles).
"""

from __future__ import annotations

import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import httpx2
import openai
import pytest

from tests.api.api_support import Live
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

ASK: list[Any] = [{"role": "user", "content": "What does contract C-2024-002 cover?"}]


def _month(live: Live) -> tuple[int, int]:
    """The category's (used, reserved) this month, read from the server's database."""
    assert live.database is not None
    with sqlite3.connect(live.database, timeout=10) as db:
        row = db.execute(
            "SELECT m.used, m.reserved FROM budgets_categorymonth m JOIN budgets_category c ON c.id = m.category_id "
            "JOIN orgs_organisation o ON o.id = c.organisation_id WHERE o.slug = 'budgeted' AND c.slug = 'syntheses'"
        ).fetchone()
    return int(row[0]), int(row[1])


def _ask(live: Live, key: str, stream: bool) -> dict[str, Any] | openai.RateLimitError:
    """What the server answered, once (``max_retries=0``), to ``ASK`` on demo-small with the API key ``key``: the
    final status and usage (a stream's last chunk's), or the refusal."""
    client = live.client(key)
    try:
        if not stream:
            return client.chat.completions.create(model="demo-small", messages=ASK).model_dump()
        final: dict[str, Any] = {}
        for chunk in client.chat.completions.create(model="demo-small", messages=ASK, stream=True):
            extra = chunk.model_extra or {}
            if "status" in extra:
                final = {**extra, "usage": chunk.usage.model_dump() if chunk.usage else extra.get("usage")}
        return final
    except openai.RateLimitError as e:
        return e


def test_twenty_concurrent_requests_on_a_nearly_spent_category_get_429_when_they_cannot_be_served(live: Live) -> None:
    used_before, _ = _month(live)
    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda i: _ask(live, "budgeted", stream=i % 2 == 0), range(20)))

    served = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, openai.RateLimitError)]
    assert len(served) + len(refused) == 20
    assert len(served) >= 3 and refused, (len(served), len(refused))
    # Whoever was admitted is served: no run is stopped by its first reservation.
    assert {r["status"] for r in served} == {"ok"}
    for e in refused:  # refused before any response started, streamed or not
        assert e.status_code == 429 and e.code == "category_budget_exhausted"
        body = e.body
        assert isinstance(body, dict) and body["param"] == "category" and "run_id" not in body
        assert re.search(r"The category “Synthèses” has used [\d,]+ of 16,000 tokens this month \(\d+ %\)", e.message)
        assert "reserved by running requests" in e.message
        # Running requests hold the rest: it may fit in a few seconds, and the client may retry then.
        assert 1 <= int(e.response.headers["retry-after"]) <= 10
        assert e.response.headers["x-should-retry"] == "true"
    # None refused was billed: the month's use is exactly what the served runs used, and nothing is left held.
    wait_until(lambda: _month(live)[1] == 0, "the month's reservations to be settled")
    used, _reserved = _month(live)
    assert used - used_before == sum(r["usage"]["total_tokens"] for r in served)


def test_a_spent_month_is_a_429_the_official_client_does_not_retry(live: Live) -> None:
    """The demo's category ``tiny`` (1 token a month) is spent: retrying before the month ends cannot help."""
    sent: list[httpx2.Request] = []
    http = httpx2.Client(event_hooks={"request": [sent.append]}, timeout=60)
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.keys["demo"], max_retries=3, http_client=http)
    try:
        for stream in (False, True):
            sent.clear()
            with pytest.raises(openai.RateLimitError) as caught:
                client.chat.completions.create(
                    model="demo-large", messages=ASK, stream=stream, extra_body={"category": "tiny"}
                )
            e = caught.value
            assert len(sent) == 1  # no retry
            assert e.response.headers["x-should-retry"] == "false"
            assert isinstance(e.body, dict)
            resets_at = datetime.fromisoformat(e.body["resets_at"])
            seconds = (resets_at - datetime.now(resets_at.tzinfo)).total_seconds()
            assert abs(int(e.response.headers["retry-after"]) - seconds) < 60  # at the month's end
            # Its true share: nothing used, but a request's first call cannot fit in one token.
            assert "“Tiny” has used 0 of 1 tokens this month (0 %)" in e.message and "resets on" in e.message
    finally:
        client.close()


def test_usage_counts_failed_and_estimated_calls(live: Live) -> None:
    data = live.client("demo").chat.completions.create(model="demo-small", messages=ASK).model_dump()
    usage = data["usage"]
    assert usage["failed_calls"] == 0 and usage["tokens_estimated"] == 0
    assert all(m["failed_calls"] == 0 and m["tokens_estimated"] == 0 for m in usage["by_model"].values())


def test_a_question_over_the_message_limit_is_refused_as_the_page_refuses_it(live: Live) -> None:
    """The length check comes first (a question this long would not fit demo-small's window either)."""
    question = "Bimbamjob invoices and payments. " * 6_000  # 198,000 characters; the limit is 32,000
    with pytest.raises(openai.BadRequestError) as caught:
        live.client("demo").chat.completions.create(
            model="demo-small",
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}],
        )
    e = caught.value
    assert e.code == "string_above_max_length" and e.param == "messages[1].content"
    assert isinstance(e.body, dict) and e.body["message"] == (
        "Invalid 'messages[1].content': string too long. Expected a string with maximum length 32000, "
        f"but got a string with length {len(question)} instead."
    )


def _key_month(live: Live) -> tuple[float, float]:
    """The capped key's (used_eur, reserved_eur) this month, read from the server's database."""
    assert live.database is not None
    with sqlite3.connect(live.database, timeout=10) as db:
        row = db.execute(
            "SELECT m.used_eur, m.reserved_eur FROM budgets_spendmonth m JOIN orgs_apikey k ON k.id = m.api_key_id "
            "WHERE k.name = 'capped'"
        ).fetchone()
    return (float(row[0]), float(row[1])) if row else (0.0, 0.0)


def test_twenty_concurrent_requests_on_a_key_s_hard_cap_get_429_spend_limit_exhausted(live: Live) -> None:
    """The key ``capped`` may spend 0.01 EUR a month: each request holds its first call's most cost (about 0.0027 EUR
    for demo-small) until it settles, so about three fit at once; the others are refused before anything starts."""

    used_before, _ = _key_month(live)
    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda i: _ask(live, "capped", stream=i % 2 == 0), range(20)))
    served = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, openai.RateLimitError)]
    assert len(served) >= 3 and refused and len(served) + len(refused) == 20, (len(served), len(refused))
    assert {r["status"] for r in served} == {"ok"}  # whoever was admitted is served
    for e in refused:
        assert e.status_code == 429 and e.code == "spend_limit_exhausted"
        body = e.body
        assert isinstance(body, dict) and body["param"] is None and body["limit"] == "key"
        assert body["type"] == "insufficient_quota" and "run_id" not in body
        assert "This API key has spent" in e.message and "reserved by running requests" in e.message
        # Its own running requests hold the rest: it may fit in a few seconds.
        assert 1 <= int(e.response.headers["retry-after"]) <= 10 and e.response.headers["x-should-retry"] == "true"
    wait_until(lambda: _key_month(live)[1] < 1e-9, "the key's reservations to be settled")
    used, _reserved = _key_month(live)
    assert used <= 0.01  # never past the cap
    assert used - used_before == pytest.approx(sum(r["usage"]["cost_eur"] for r in served))
