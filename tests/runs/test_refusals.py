"""One request check with typed refusals: ``intake.check`` refuses with a code and its parameters, and
each reader words it once (``wording.refusal_text``): the page and scheduled tasks in the reader's language,
the API in English with its stable code."""

from __future__ import annotations

import dataclasses
import typing
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import translation

from assistant.api.errors import REFUSALS, refusal_error
from assistant.budgets.models import Category
from assistant.engine.errors import RequestRefused
from assistant.engine.refusals import Refusal, RefusalCode
from assistant.orgs.models import Organisation
from assistant.runs import intake, wording
from assistant.runs.models import Run

pytestmark = pytest.mark.django_db

GOOD = intake.Ask(text="Bimbamjob?", model="demo-large", level="approfondi", resources=("kb:factures", "agents"))


def _refusal(**changes: Any) -> Refusal:
    org = Organisation.objects.get(slug="demo")
    ask = dataclasses.replace(GOOD, **changes)
    with pytest.raises(RequestRefused) as refused:
        intake.check(org, ask)
    return refused.value.refusal


def test_each_refusal_is_a_code_with_its_parameters(demo_data: None) -> None:
    Organisation.objects.filter(slug="demo").update(allowed_models=["demo-large"])
    assert _refusal(text="  ") == Refusal(code="empty_message")
    assert _refusal(level="turbo") == Refusal(code="unknown_level", level="turbo")
    assert _refusal(model="gpt-unknown") == Refusal(
        code="model_not_found", model="gpt-unknown", allowed=("demo-large",)
    )
    assert _refusal(model="demo-small") == Refusal(
        code="model_not_allowed", model="demo-small", allowed=("demo-large",)
    )
    assert _refusal(resources=("shell",)) == Refusal(code="unknown_resource", resource="shell")
    assert _refusal(resources=("agents",)) == Refusal(code="agents_need_resource")
    assert _refusal(resources=("kb:gone",)) == Refusal(code="knowledge_base_not_found", resource="kb:gone")
    assert _refusal(resources=("web",)) == Refusal(code="resource_unavailable", resource="web")  # not configured
    intake.check(Organisation.objects.get(slug="demo"), GOOD)  # and a good one passes


def test_the_budget_refusals_come_from_the_same_intake(demo_data: None) -> None:
    org = Organisation.objects.get(slug="demo")
    user = get_user_model().objects.get(username="demo")
    with pytest.raises(RequestRefused) as refused:
        intake.create_run(user, org, None, dataclasses.replace(GOOD, category="nope"))
    assert refused.value.refusal.code == "unknown_category" and refused.value.refusal.category == "nope"
    assert set(refused.value.refusal.allowed) == set(
        Category.objects.filter(organisation=org).values_list("slug", flat=True)
    )
    Category.objects.filter(organisation=org).update(monthly_tokens=1)
    with pytest.raises(RequestRefused) as refused:
        intake.create_run(user, org, None, GOOD)
    spent = refused.value.refusal
    assert spent.code == "category_spent" and spent.limit == 1 and spent.resets_at is not None
    assert spent.zone == org.time_zone
    assert not Run.objects.exists()


SAMPLES: dict[RefusalCode, Refusal] = {
    "empty_message": Refusal(code="empty_message"),
    "model_not_found": Refusal(code="model_not_found", model="gpt-x", allowed=("demo-large",)),
    "model_not_allowed": Refusal(code="model_not_allowed", model="demo-small", allowed=("demo-large",)),
    "unknown_level": Refusal(code="unknown_level", level="turbo"),
    "unknown_resource": Refusal(code="unknown_resource", resource="shell"),
    "agents_need_resource": Refusal(code="agents_need_resource"),
    "knowledge_base_not_found": Refusal(code="knowledge_base_not_found", resource="kb:gone"),
    "connector_not_found": Refusal(code="connector_not_found", resource="mcp:crm"),
    "document_not_found": Refusal(code="document_not_found", resource="doc:factures/doc-12"),
    "document_not_ready": Refusal(code="document_not_ready", resource="doc:factures/doc-12"),
    "resource_unavailable": Refusal(code="resource_unavailable", resource="web"),
    "no_categories": Refusal(code="no_categories", category="x"),
    "unknown_category": Refusal(code="unknown_category", category="nope", allowed=("catalogue", "syntheses")),
    "category_spent": Refusal(
        code="category_spent",
        category="syntheses",
        name="Syntheses",
        used=1_000_000,
        limit=1_000_000,
        tokens=5_000,
        percent=100,
        resets_at=datetime(2027, 1, 1, 5, tzinfo=UTC),
        zone="America/New_York",
        retry_after=3_600,
    ),
    "category_busy": Refusal(
        code="category_busy", category="syntheses", name="Syntheses", used=900, limit=1_000, reserved=100, percent=90
    ),
    "spend_limit_spent": Refusal(
        code="spend_limit_spent",
        limit_kind="member",
        used_eur=19.98,
        limit_eur=20.0,
        cost_eur=0.0512,
        percent=99,
        resets_at=datetime(2027, 1, 1, 5, tzinfo=UTC),
        zone="America/New_York",
        retry_after=3_600,
    ),
    "spend_limit_busy": Refusal(
        code="spend_limit_busy", limit_kind="key", used_eur=9.0, limit_eur=10.0, reserved_eur=0.99, percent=90
    ),
    "owner_left": Refusal(code="owner_left"),
    "context_too_long": Refusal(code="context_too_long", model="demo-small", used=40_000, limit=32_000),
    "message_too_long": Refusal(code="message_too_long", used=40_000, limit=32_000),
}


def test_every_refusal_is_worded_in_english_and_in_french() -> None:
    assert set(SAMPLES) == set(typing.get_args(RefusalCode))  # a new code must be given its words
    for code, refusal in SAMPLES.items():
        with translation.override("en"):
            english = wording.refusal_text(refusal)
        with translation.override("fr"):
            french = wording.refusal_text(refusal)
        assert english and french != english, code
        assert "%(" not in english + french and code not in french, code
    with translation.override("fr"):
        spent = wording.refusal_text(SAMPLES["category_spent"])
    assert "1\u00a0000\u00a0000" in spent and "1er janvier 2027 à minuit (America/New_York)" in spent


def test_the_api_gives_each_refusal_its_status_its_stable_code_and_english() -> None:
    assert set(REFUSALS) == set(typing.get_args(RefusalCode))
    with translation.override("fr"):  # whatever the language active, the API's message is English
        error = refusal_error(SAMPLES["model_not_allowed"])
    assert (error.status, error.code, error.param) == (403, "model_not_allowed", "model")
    assert error.message == "The model 'demo-small' is not allowed here. Allowed models: demo-large."
    spent = refusal_error(SAMPLES["category_spent"])
    assert (spent.status, spent.code) == (429, "category_budget_exhausted")
    assert spent.extra == {"resets_at": "2027-01-01T05:00:00+00:00", "retry_after": "3600"} and not spent.retry
    long = refusal_error(SAMPLES["context_too_long"])
    assert (long.status, long.code, long.extra) == (
        400,
        "context_length_exceeded",
        {"tokens": 40_000, "context_window": 32_000},
    )
    # OpenAI's own sentence, which clients parse.
    assert long.message.startswith(
        "This model's maximum context length is 32000 tokens. However, your messages resulted in 40000 tokens."
    )
    assert refusal_error(SAMPLES["agents_need_resource"]).code == "agents_without_resource"
    # A spend limit's: OpenAI's insufficient_quota, no param, whose limit it is.
    over = refusal_error(SAMPLES["spend_limit_spent"])
    assert (over.status, over.code, over.param, over.retry) == (429, "spend_limit_exhausted", None, False)
    assert over.extra == {"limit": "member", "resets_at": "2027-01-01T05:00:00+00:00", "retry_after": "3600"}
    assert over.message.startswith("You have spent 19.98 EUR of your monthly spend limit of 20.00 EUR (99 %)")
    busy = refusal_error(SAMPLES["spend_limit_busy"])
    assert (busy.code, busy.extra["limit"], busy.retry) == ("spend_limit_exhausted", "key", True)


def test_the_page_words_a_refusal_in_the_readers_language(demo_data: None) -> None:
    client = Client()
    assert client.login(username="demo", password="demo-password")
    client.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    form = {"text": "Bimbamjob ?", "model": "demo-large", "level": "approfondi", "resources": ["kb:gone"]}
    response = client.post("/c/new", form)
    assert response.status_code == 422  # refused in place
    page = response.content.decode()
    assert "La base de connaissances « gone » n’existe pas ou vous ne pouvez pas la lire." in page
    assert "does not exist" not in page


def test_a_scheduled_tasks_refused_execution_is_worded_when_shown_in_the_readers_language(demo_data: None) -> None:
    from assistant.schedules import services
    from assistant.schedules.models import Execution, ScheduledTask

    task = ScheduledTask.objects.create(
        organisation=Organisation.objects.get(slug="demo"),
        owner=get_user_model().objects.get(username="demo"),
        name="Weekly",
        prompt="Bimbamjob?",
        model="demo-large",
        level="approfondi",
        resources=["kb:gone", "agents"],
        schedule="0 8 * * 1",
        cost_cap_eur=1,
    )
    assert services.start_execution(task.pk, now=True) is None
    execution = Execution.objects.get()
    assert execution.refusal == Refusal(code="knowledge_base_not_found", resource="kb:gone")
    client = Client()
    assert client.login(username="demo", password="demo-password")
    assert "The knowledge base &#x27;gone&#x27; does not exist" in client.get("/tasks/").content.decode()
    client.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    page = client.get("/tasks/").content.decode()
    assert "La base de connaissances « gone » n’existe pas ou vous ne pouvez pas la lire." in page


def test_every_cause_is_worded_in_english_and_in_french() -> None:
    from assistant.engine.causes import Cause, CauseCode, ModelErrorKind

    causes = [Cause(code=code, used=2, limit=2) for code in typing.get_args(CauseCode)]
    causes += [Cause(code="model_error", kind=kind) for kind in typing.get_args(ModelErrorKind)]
    causes += [  # an agent stopped alone; a tool stopped with its run, the run's cause worded within
        Cause(code="stopped_by_user", agent_id="agent-1"),
        Cause(code="run_stopped", because=Cause(code="cost_cap")),
        Cause(code="run_stopped"),
        Cause(code="delegation_cap"),
    ]
    for cause in causes:
        with translation.override("en"):
            english = wording.cause_text(cause)
        with translation.override("fr"):
            french = wording.cause_text(cause)
        assert english and french != english, cause
        assert cause.code not in french and (cause.kind or "§") not in french, cause
