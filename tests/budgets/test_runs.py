"""Runs and their category: classified at the start, every token charged once, refused before any model
call when the category is exhausted, stopped as Stop does when it is crossed midway, never helped by
another category."""

from __future__ import annotations

import asyncio
import html

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import formats, timezone
from pytest_django import Settings

from assistant.api.completions import _completion as api_completion
from assistant.budgets import reservations, services, state
from assistant.budgets.models import Category, CategoryMonth
from assistant.budgets.months import month_of, next_month, zone
from assistant.engine.errors import BudgetExceeded
from assistant.runs import execution, intake
from assistant.runs.models import Run, Step
from tests.budgets.budgets_support import QUESTION, SYNTHESIS, Admissions, World, signed_in, this_month
from tests.waiting import until


def exhaust(category: Category) -> None:
    """Other requests of the category used what was left of its month (calls in flight may still settle)."""
    row = this_month(category)
    CategoryMonth.objects.filter(pk=row.pk).update(used=category.monthly_tokens)


def reset_date(category: Category) -> str:
    month = month_of(timezone.now(), zone(category.organisation.time_zone))
    return formats.date_format(next_month(month), "j F Y")


# Classification --------------------------------------------------------------------------------------


def test_the_composer_offers_the_categories_with_the_default_chosen(world: World) -> None:
    page = signed_in("mia").get("/").content.decode()
    assert '<select name="category">' in page
    assert '<option value="catalogue" selected>Short catalogue questions</option>' in page
    assert '<option value="syntheses">Long multi-document syntheses</option>' in page
    assert '<option value="administration">Administration</option>' in page


def test_a_request_is_classified_explicitly_else_into_the_default(tworld: World, fast_demo: None) -> None:
    """Committed (``tworld``): the runs execute in the background and write, which a test's open transaction would
    hold up on SQLite's lock until its busy timeout."""
    client = signed_in("mia")
    assert client.post("/c/new", {**QUESTION, "category": "administration"}).status_code == 302
    assert client.post("/c/new", QUESTION).status_code == 302  # no category named: the default
    assert list(Run.objects.order_by("created").values_list("category", flat=True)) == ["administration", "catalogue"]


def test_an_unknown_or_foreign_category_is_refused(world: World) -> None:
    client = signed_in("mia")
    response = client.post("/c/new", {**QUESTION, "category": "obsidian"})  # the other organisation's
    assert response.status_code == 422
    assert "does not exist here" in html.unescape(response.content.decode())
    assert not Run.objects.exists()


def test_an_organisation_without_categories_runs_unbudgeted(world: World) -> None:
    world.other_category.delete()
    assert services.classify(world.other) is None
    assert services.admit(world.other, "", "Hello", "demo-large") is None


# Every token charged once --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_every_token_of_a_run_agents_included_is_charged_once_to_its_category(
    tworld: World, fast_demo: None, member_client: AsyncClient
) -> None:
    client = member_client
    assert (await client.post("/c/new", SYNTHESIS)).status_code == 302
    run = await Run.objects.aget()
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "ok" and run.category == "syntheses"
    assert set(run.usage["by_model"]) == {"demo-large", "demo-small"}  # the main model and its agents
    row = await sync_to_async(this_month)(tworld.syntheses)
    assert row.used == run.usage["total_tokens"]
    assert row.calls == sum(m["calls"] for m in run.usage["by_model"].values())
    assert row.cost_eur == pytest.approx(run.cost_eur)
    assert row.reserved == 0
    # Nothing was charged anywhere else.
    others = CategoryMonth.objects.exclude(category=tworld.syntheses).filter(used__gt=0)
    assert not await others.aexists()


# Refused before any model call ---------------------------------------------------------------------


def test_an_exhausted_category_refuses_before_any_model_call_and_keeps_the_text(world: World) -> None:
    exhaust(world.syntheses)
    before = this_month(world.syntheses)
    client = signed_in("mia")
    response = client.post("/c/new", SYNTHESIS, headers={"HX-Request": "true"})
    assert response.status_code == 422
    page = html.unescape(response.content.decode())
    assert 'id="composer"' in page  # the composer comes back, with the reason and the typed text
    assert (
        "The category “Long multi-document syntheses” has used 4,500,000 of 4,500,000 tokens this month (100 %)" in page
    )
    assert f"It resets on {reset_date(world.syntheses)} at midnight (Europe/Paris)" in page
    assert SYNTHESIS["text"] in page
    assert '<option value="syntheses" selected>' in page  # and the category the user chose
    assert not Run.objects.exists()
    after = this_month(world.syntheses)
    assert (after.used, after.reserved, after.calls) == (before.used, before.reserved, before.calls)


def test_the_refusal_speaks_french(world: World) -> None:
    exhaust(world.syntheses)
    client = signed_in("mia")
    client.cookies["django_language"] = "fr"
    page = html.unescape(client.post("/c/new", SYNTHESIS).content.decode())
    assert (
        "La catégorie « Long multi-document syntheses » a utilisé 4\xa0500\xa0000 jetons sur 4\xa0500\xa0000 ce mois-ci (100 %)"
        in page
    )
    assert "minuit (Europe/Paris)" in page


def test_no_transfer_between_categories(tworld: World, fast_demo: None) -> None:
    """Committed (``tworld``): the two runs it starts write in the background."""
    world = tworld
    exhaust(world.syntheses)
    catalogue_before = state.state_of(world.catalogue)
    client = signed_in("mia")
    assert client.post("/c/new", SYNTHESIS).status_code == 422
    # The other categories still work, and their budgets are untouched by the exhausted one.
    assert client.post("/c/new", {**QUESTION, "category": "catalogue"}).status_code == 302
    assert client.post("/c/new", {**QUESTION, "category": "administration"}).status_code == 302
    catalogue_after = state.state_of(world.catalogue)
    assert catalogue_after.budget == catalogue_before.budget == 4_000_000
    assert state.state_of(world.syntheses).budget == 4_500_000
    # Even a single call of the exhausted category is refused while the others have plenty left.
    with pytest.raises(BudgetExceeded):
        reservations.reserve(world.syntheses.pk, 1)
    reservations.reserve(world.administration.pk, 1)


# Crossed midway: stopped as Stop does --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_run_crossing_its_budget_during_a_delegation_stops_with_the_agents_findings(
    tworld: World, settings: Settings, member_client: AsyncClient
) -> None:
    settings.DEMO_PACE = 0.0
    settings.DEMO_LATENCY = 0.3
    client = member_client
    assert (await client.post("/c/new", SYNTHESIS)).status_code == 302
    run = await Run.objects.aget()
    searched = Step.objects.filter(run=run, kind="agent_action", data__action__kind="search")
    await until(searched.aexists, "the agents to search: the delegation under way")
    await sync_to_async(exhaust)(tworld.syntheses)
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()

    assert run.status == "stopped"
    stopped = await Step.objects.aget(run=run, kind="stopped")
    assert stopped.data["message"] == "stopped: the category's monthly budget is reached"
    finished = [s.data async for s in Step.objects.filter(run=run, kind="agent_finished")]
    assert len(finished) == 2 and {f["status"] for f in finished} == {"stopped"}
    assert all("Searched" in f["report"] for f in finished)  # each agent's findings so far are kept
    assert all(f["cause"]["code"] == "category_budget" and f["cause"]["used"] is None for f in finished)
    row = await sync_to_async(this_month)(tworld.syntheses)
    assert row.reserved == 0
    # Through the API, the same run is a 200 whose status is stopped, with its cause as a code.
    done, _error = await sync_to_async(api_completion)(run.pk, [])
    assert (done.status, done.reason_code) == ("stopped", "category_budget")
    # The page shows why it stopped and what the agents had found.
    page = (await client.get(f"/c/{run.conversation_id}/")).content.decode()
    assert "stopped: the category&#x27;s monthly budget is reached" in page
    # Their reports were the engine's record of what they had done: the page lists their actions instead.
    assert "It wrote no report" in page and "Searched “" in page


@pytest.mark.django_db(transaction=True)
async def test_twenty_concurrent_runs_against_room_for_about_five(
    tworld: World, fast_demo: None, twenty_admissions: Admissions
) -> None:
    category = tworld.administration
    # A plain question is one call of demo-large, reserving its prompt and 8,192 tokens of output.
    category.monthly_tokens = 5 * 9_000
    await category.asave()
    ask = intake.Ask(text=QUESTION["text"], model="demo-large", level="rapide", resources=(), category="administration")
    created, refused = await twenty_admissions(ask, state.CategoryExhausted)
    # Each admitted run holds its first call from intake: the others are refused there, before anything is saved.
    assert 5 <= len(created) < 20 and len(created) + len(refused) == 20
    assert await Run.objects.acount() == len(created)
    for e in refused:  # the month is not spent: running requests hold the rest, so retry in a few seconds
        assert isinstance(e, state.CategoryExhausted)
        assert not e.spent and e.retry_after == state.RESERVED_RETRY_SECONDS
        assert "the rest is reserved by running requests" in str(e)
    await asyncio.gather(*(execution.execute_run(r) for r in created))

    done = [r async for r in Run.objects.all()]
    row = await sync_to_async(this_month)(category)
    assert row.reserved == 0 and not await sync_to_async(row.reservations.exists)()
    assert row.used <= category.monthly_tokens
    assert row.used == sum(r.usage.get("total_tokens", 0) for r in done)  # each token counted once
    assert row.calls == len(done)  # the intake's hold was the first call's: no second reservation, no extra call
    assert {r.status for r in done} == {"ok"}  # an admitted run is never stopped by its first reservation
