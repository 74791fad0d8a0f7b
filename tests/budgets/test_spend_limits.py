"""Spend limits per member and per API key: monthly EUR in the organisation's time zone, beside the category budgets.

A hard cap refuses a request its month cannot take before any model call and before anything is saved (the page
next to the composer, the API a 429 ``spend_limit_exhausted``), and stops a run whose next call does not fit as Stop
does (cause ``spend_limit``); an alert limit refuses nothing and e-mails the admins and the member at 80 % and 100 %.
A member's limit covers their chat runs and scheduled tasks; an API request counts against its key only.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator
from datetime import datetime
from decimal import Decimal
from io import StringIO
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.core import mail
from django.core.management import CommandError, call_command
from django.test import AsyncClient
from django.utils import timezone, translation
from pytest_django import Settings

from assistant.budgets import spend, spend_months, spend_state
from assistant.budgets.models import SpendAlert, SpendMonth, SpendReservation
from assistant.budgets.months import month_of, zone
from assistant.catalogue import snapshot
from assistant.engine.errors import SpendLimitReached
from assistant.engine.tokens import estimate_tokens
from assistant.orgs import keys
from assistant.orgs.models import ApiKey, Membership, Organisation
from assistant.orgs.spending import limit_for
from assistant.runs import execution, intake
from assistant.runs.models import Conversation, Run, Step
from assistant.runs.start import RunStart
from tests.asgi_app import asgi_transport
from tests.budgets.budgets_support import QUESTION, SYNTHESIS, Admissions, World, signed_in

ASK = [{"role": "user", "content": "What does contract C-2024-002 cover?"}]


def first_call_eur() -> float:
    """What admission weighs a plain question's first call of demo-large at (its text and the output cap)."""
    info = snapshot.catalogue()["demo-large"]
    return spend.call_eur("demo-large", estimate_tokens(QUESTION["text"]) + info.output_cap)


def member_limit(world: World, eur: str, mode: str = "hard") -> None:
    Membership.objects.filter(organisation=world.demo, user=world.member).update(
        limit_mode=mode, monthly_eur=Decimal(eur)
    )


def spent(world: World, user_id: int | None = None, key: ApiKey | None = None, eur: float = 0.0) -> SpendMonth:
    """The month's row of the member (or of ``key``), with ``eur`` already spent."""
    tz = zone(world.demo.time_zone)
    month = month_of(timezone.now(), tz)
    row = spend_months.spend_row(
        world.demo.pk, None if key else (user_id or world.member.pk), key.pk if key else None, month, tz
    )
    SpendMonth.objects.filter(pk=row.pk).update(used_eur=eur)
    row.refresh_from_db()
    return row


# Which limit applies ------------------------------------------------------------------------------------------


def test_a_member_has_their_own_limit_else_the_organisation_s_default_and_a_key_its_own(world: World) -> None:
    assert limit_for(world.demo, world.member.pk, None) is None  # nothing set: no limit
    Organisation.objects.filter(pk=world.demo.pk).update(member_monthly_eur=Decimal("20"), member_limit_mode="alert")
    world.demo.refresh_from_db()
    default = limit_for(world.demo, world.member.pk, None)
    assert default is not None and (default.kind, default.eur, default.hard, default.inherited) == (
        "member",
        20.0,
        False,
        True,
    )
    member_limit(world, "5")
    own = limit_for(world.demo, world.member.pk, None)
    assert own is not None and (own.eur, own.hard, own.inherited) == (5.0, True, False)
    Membership.objects.filter(user=world.member).update(limit_mode="none", monthly_eur=None)
    assert limit_for(world.demo, world.member.pk, None) is None  # exempted
    # An API request counts against its key's limit only, never the service user's or the default.
    key, _ = keys.create_key(world.demo, "ci")
    assert limit_for(world.demo, world.member.pk, key) is None
    capped, _ = keys.create_key(world.demo, "capped", monthly_eur=Decimal("3"))
    limit = limit_for(world.demo, None, capped)
    assert limit is not None and (limit.kind, limit.eur, limit.hard) == ("key", 3.0, True)


def test_a_month_s_row_starts_from_what_the_month_s_finished_runs_cost(world: World) -> None:
    conversation = world.member.conversations.create(organisation=world.demo, title="t")
    Run.objects.create(
        conversation=conversation,
        organisation=world.demo,
        user=world.member,
        model="demo-large",
        cost_eur=0.25,
        status="ok",
    )
    Run.objects.create(  # another member's: not theirs
        conversation=conversation,
        organisation=world.demo,
        user=world.admin,
        model="demo-large",
        cost_eur=9.0,
        status="ok",
    )
    member_limit(world, "1")
    place = spend_months.place_for(world.demo, world.member.pk, None)
    assert place is not None
    assert SpendMonth.objects.get(pk=place.row_id).used_eur == pytest.approx(0.25)


# Refused before anything is saved ---------------------------------------------------------------------------


def test_a_spent_member_is_refused_next_to_the_composer_before_anything_is_saved(world: World) -> None:
    member_limit(world, "2")
    spent(world, eur=1.99)
    client = signed_in("mia")
    response = client.post("/c/new", QUESTION, headers={"HX-Request": "true"})
    assert response.status_code == 422
    page = html.unescape(response.content.decode())
    assert 'id="composer"' in page and QUESTION["text"] in page
    assert "You have spent 1.99 EUR of your monthly spend limit of 2.00 EUR (99 %)" in page
    assert "midnight (Europe/Paris)" in page
    assert not Run.objects.exists() and not SpendReservation.objects.exists()
    # In French too.
    client.cookies["django_language"] = "fr"
    page = html.unescape(client.post("/c/new", QUESTION).content.decode())
    assert "Vous avez dépensé 1,99 EUR de votre limite de dépenses mensuelle de 2,00 EUR (99 %)" in page


def test_an_alert_limit_refuses_nothing(tworld: World, fast_demo: None) -> None:
    member_limit(tworld, "2", "alert")
    spent(tworld, eur=5.0)
    assert signed_in("mia").post("/c/new", QUESTION).status_code == 302


@pytest.fixture
async def api(tworld: World, fast_demo: None) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=30) as http:
        yield http


async def _ask(http: httpx2.AsyncClient, secret: str, **body: Any) -> httpx2.Response:
    return await http.post(
        "/v1/chat/completions",
        json={"model": "demo-large", "messages": ASK, **body},
        headers={"Authorization": f"Bearer {secret}"},
    )


@pytest.mark.django_db(transaction=True)
async def test_a_spent_key_is_a_429_spend_limit_exhausted_the_client_does_not_retry(
    tworld: World, api: httpx2.AsyncClient
) -> None:
    key, secret = await sync_to_async(keys.create_key)(tworld.demo, "ci", monthly_eur=Decimal("1.00"))
    await sync_to_async(spent)(tworld, key=key, eur=0.999)
    for stream in (False, True):
        response = await _ask(api, secret, stream=stream)
        assert response.status_code == 429
        error = response.json()["error"]
        assert (error["type"], error["code"], error["param"], error["limit"]) == (
            "insufficient_quota",
            "spend_limit_exhausted",
            None,
            "key",
        )
        assert error["message"].startswith(
            "This API key has spent 0.99 EUR of its monthly spend limit of 1.00 EUR (99 %)"
        )
        assert response.headers["x-should-retry"] == "false"
        resets_at = datetime.fromisoformat(error["resets_at"])
        assert abs(int(response.headers["retry-after"]) - (resets_at - timezone.now()).total_seconds()) < 60
    assert not await Run.objects.aexists() and not await SpendReservation.objects.aexists()
    # The member's limit does not apply to the API (API runs belong to the service user): only the key's does.
    member_limit_async = sync_to_async(member_limit)
    await member_limit_async(tworld, "0.01")
    _, free = await sync_to_async(keys.create_key)(tworld.demo, "free")
    assert (await _ask(api, free)).status_code == 200


@pytest.mark.django_db(transaction=True)
async def test_an_api_run_counts_against_its_key_only(tworld: World, api: httpx2.AsyncClient) -> None:
    key, secret = await sync_to_async(keys.create_key)(tworld.demo, "ci", monthly_eur=Decimal("50"))
    response = await _ask(api, secret)
    assert response.status_code == 200
    run = await Run.objects.aget()
    row = await SpendMonth.objects.aget(api_key=key)
    assert row.used_eur == pytest.approx(run.cost_eur) and row.reserved_eur == 0 and row.calls == 1
    assert run.cost_eur > 0
    assert not await SpendMonth.objects.filter(user__isnull=False).aexists()


# Crossed midway: stopped as Stop does ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_run_crossing_a_hard_cap_stops_with_the_cause_spend_limit(
    tworld: World, settings: Settings, member_client: AsyncClient
) -> None:
    settings.DEMO_PACE = 0.0
    settings.DEMO_LATENCY = 0.05
    ask = intake.Ask(
        text=SYNTHESIS["text"], model="demo-large", level="approfondi", resources=tuple(SYNTHESIS["resources"])
    )
    # What the run's first call holds (read from a run admitted and then taken back).
    await sync_to_async(member_limit)(tworld, "100")
    trial = (await sync_to_async(intake.create_run)(tworld.member, tworld.demo, None, ask)).run
    first = (await SpendReservation.objects.aget(run=trial)).eur
    await sync_to_async(spend.release_run)(trial.pk)
    await Conversation.objects.filter(pk=trial.conversation_id).adelete()
    # The month has room for that first call and a little more: not for the main model's next call as well (its
    # request is longer, and the first call's cost is then spent).
    await sync_to_async(member_limit)(tworld, "1")
    await sync_to_async(spent)(tworld, eur=1.0 - first - 0.003)
    client = member_client
    assert (await client.post("/c/new", SYNTHESIS)).status_code == 302
    run = await Run.objects.aget()
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "stopped"
    stopped = await Step.objects.aget(run=run, kind="stopped")
    assert stopped.data["cause"]["code"] == "spend_limit" and stopped.data["cause"]["limit"] == 1.0
    assert await Step.objects.filter(run=run, kind="agent_finished").acount() == 2  # its agents had answered
    row = await SpendMonth.objects.aget(user=tworld.member)
    assert row.reserved_eur == pytest.approx(0) and not await SpendReservation.objects.aexists()
    assert row.used_eur == pytest.approx(1.0 - first - 0.003 + run.cost_eur)
    assert row.used_eur <= 1.0  # no overshoot: each call held the most it could cost
    page = (await client.get(f"/c/{run.conversation_id}/")).content.decode()
    assert "Stopped: the spend limit is reached (0.9" in html.unescape(page)


# Concurrency: no overshoot beyond what is reserved ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_twenty_concurrent_runs_against_a_member_s_room_for_about_five(
    tworld: World, fast_demo: None, twenty_admissions: Admissions
) -> None:
    limit = round(5.5 * first_call_eur(), 2)
    await sync_to_async(member_limit)(tworld, str(limit))
    ask = intake.Ask(text=QUESTION["text"], model="demo-large", level="rapide", resources=())
    created, refused = await twenty_admissions(ask, spend.SpendExhausted)
    assert 5 <= len(created) < 20 and len(created) + len(refused) == 20
    assert await Run.objects.acount() == len(created)
    for e in refused:  # running requests hold the rest: retry in a few seconds
        assert isinstance(e, spend.SpendExhausted)
        assert not e.spent and "reserved by your running requests" in str(e)
    await check_runs_within(tworld, created, limit)


async def check_runs_within(world: World, created: list[RunStart], limit: float) -> None:
    """The admitted runs run all at once: each ends ok, what they spend never passes the member's ``limit`` and is
    what they cost, and nothing stays held (run by the PostgreSQL tests too, ``test_postgres``)."""
    await asyncio.gather(*(execution.execute_run(r) for r in created))
    done = [r async for r in Run.objects.all()]
    row = await SpendMonth.objects.aget(user=world.member)
    assert row.reserved_eur == pytest.approx(0) and not await SpendReservation.objects.aexists()
    assert row.used_eur <= limit
    assert row.used_eur == pytest.approx(sum(r.cost_eur for r in done))
    assert row.calls == len(done)  # the intake's hold was the first call's
    assert {r.status for r in done} == {"ok"}


def check_threads(world: World) -> None:
    """Twenty threads, each on its own connection, hold the most a call can cost at the same instant, then settle it:
    what is held and settled never passes the limit (run by the PostgreSQL tests, ``test_postgres``)."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connection

    tokens = 10_000
    one = spend.call_eur("demo-small", tokens)  # 0.0036 EUR: five fit in 0.02
    member_limit(world, "0.02")
    place = spend_months.place_for(world.demo, world.member.pk, None)
    assert place is not None
    limit = place.limit.eur
    barrier = Barrier(20)

    def work(i: int) -> bool:
        try:
            barrier.wait(timeout=30)
            try:
                held = spend.reserve(place, "demo-small", tokens, timezone.now(), None)
            except SpendLimitReached:
                return False
            row = SpendMonth.objects.get(pk=place.row_id)
            assert row.used_eur + row.reserved_eur <= limit + 1e-9
            spend.settle(place, held, one, timezone.now())
            return True
        finally:
            connection.close()

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(work, range(20)))
    row = SpendMonth.objects.get(pk=place.row_id)
    assert sum(results) == int(limit // one) and row.used_eur <= limit + 1e-9
    assert row.reserved_eur == pytest.approx(0) and row.calls == sum(results)


# Alerts -----------------------------------------------------------------------------------------------------------


def test_alerts_at_80_and_100_percent_are_emailed_once_to_the_admins_and_the_member(world: World) -> None:
    member_limit(world, "10", "alert")
    place = spend_months.place_for(world.demo, world.member.pk, None)
    assert place is not None
    spend.settle(place, None, 7.0, timezone.now())
    assert not mail.outbox
    spend.settle(place, None, 1.5, timezone.now())  # 85 %
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert "mia@example.com" in message.to and "mia is at 80 % of its monthly spend limit" in message.subject
    assert "an alert: nothing is refused" in message.body
    spend.settle(place, None, 0.1, timezone.now())  # 86 %: nothing new
    assert len(mail.outbox) == 1
    spend.settle(place, None, 2.0, timezone.now())
    assert len(mail.outbox) == 2 and "at 100 %" in mail.outbox[1].subject
    assert sorted(SpendAlert.objects.values_list("threshold", flat=True)) == [80, 100]


# The key's limit from the command line ----------------------------------------------------------------------------


def test_create_api_key_takes_a_monthly_hard_cap_or_an_alert(world: World) -> None:
    out, err = StringIO(), StringIO()
    call_command("create_api_key", "--org", "demo", "--name", "cap", "--monthly-eur", "12.5", stdout=out, stderr=err)
    key = ApiKey.objects.get(name="cap")
    assert (key.monthly_eur, key.limit_mode) == (Decimal("12.50"), "hard") and "a hard cap" in err.getvalue()
    call_command(
        "create_api_key",
        "--org",
        "demo",
        "--name",
        "watch",
        "--monthly-eur",
        "3",
        "--alert-only",
        stdout=out,
        stderr=err,
    )
    assert ApiKey.objects.get(name="watch").limit_mode == "alert"
    for bad in (["--monthly-eur", "0"], ["--monthly-eur", "nan"], ["--monthly-eur", "lots"], ["--alert-only"]):
        with pytest.raises(CommandError):
            call_command("create_api_key", "--org", "demo", *bad, stdout=out, stderr=err)


# Settings → Members and the key form -------------------------------------------------------------------------------


def test_an_admin_sets_the_default_and_a_member_s_own_limit_in_settings_members(world: World) -> None:
    admin = signed_in("demo")
    page = admin.get("/settings/members/")
    assert page.status_code == 200 and 'data-member="mia"' in page.content.decode()
    saved = admin.post(
        "/settings/members/default", {"default-member_monthly_eur": "25", "default-member_limit_mode": "alert"}
    )
    assert saved.status_code == 302
    world.demo.refresh_from_db()
    assert (world.demo.member_monthly_eur, world.demo.member_limit_mode) == (Decimal("25.00"), "alert")
    membership = Membership.objects.get(organisation=world.demo, user=world.member)
    prefix = f"m{membership.pk}"
    # An own limit needs its amount.
    refused = admin.post(f"/settings/members/{membership.pk}/limit", {f"{prefix}-limit_mode": "hard"})
    assert refused.status_code == 422 and "Give the amount" in refused.content.decode()
    assert (
        admin.post(
            f"/settings/members/{membership.pk}/limit", {f"{prefix}-limit_mode": "hard", f"{prefix}-monthly_eur": "4.5"}
        ).status_code
        == 302
    )
    membership.refresh_from_db()
    assert (membership.limit_mode, membership.monthly_eur) == ("hard", Decimal("4.50"))
    # Back to the default: the amount goes.
    admin.post(f"/settings/members/{membership.pk}/limit", {f"{prefix}-limit_mode": "", f"{prefix}-monthly_eur": "9"})
    membership.refresh_from_db()
    assert (membership.limit_mode, membership.monthly_eur) == ("", None)
    from assistant.orgs.models import AuditEntry

    assert {"spend.default_saved", "spend.member_saved"} <= set(AuditEntry.objects.values_list("action", flat=True))


def test_members_cannot_set_limits_and_another_organisation_s_member_does_not_exist_here(world: World) -> None:
    member = signed_in("mia")
    assert member.get("/settings/members/").status_code == 403
    membership = Membership.objects.get(organisation=world.demo, user=world.member)
    assert (
        member.post(f"/settings/members/{membership.pk}/limit", {f"m{membership.pk}-limit_mode": "none"}).status_code
        == 403
    )
    foreign = Membership.objects.get(organisation=world.other, user=world.mallory)
    assert (
        signed_in("demo")
        .post(f"/settings/members/{foreign.pk}/limit", {f"m{foreign.pk}-limit_mode": "none"})
        .status_code
        == 404
    )


def test_the_key_form_takes_a_monthly_limit(world: World) -> None:
    admin = signed_in("demo")
    page = admin.post(
        "/settings/api-keys/new", {"name": "CI", "restrict": "", "monthly_eur": "30", "limit_mode": "alert"}
    )
    assert page.status_code == 200
    key = ApiKey.objects.get(name="CI")
    assert (key.monthly_eur, key.limit_mode) == (Decimal("30.00"), "alert")
    assert "30.00 EUR · alert" in html.unescape(admin.get("/settings/api-keys/").content.decode())
    refused = admin.post(
        "/settings/api-keys/new", {"name": "Bad", "restrict": "", "monthly_eur": "-1", "limit_mode": "hard"}
    )
    assert refused.status_code == 422 and not ApiKey.objects.filter(name="Bad").exists()
    # Rotated, the new key keeps the limit.
    new, _secret = keys.rotate(key)
    assert (new.monthly_eur, new.limit_mode) == (Decimal("30.00"), "alert")


# What a member and the admins read --------------------------------------------------------------------------------


def test_my_usage_shows_the_member_s_month_and_the_chat_shows_the_banner_at_80_percent(world: World) -> None:
    member_limit(world, "10")
    spent(world, eur=8.5)
    client = signed_in("mia")
    page = html.unescape(client.get("/settings/usage/mine/").content.decode())
    assert "8.50 EUR" in page and "of your monthly spend limit of 10.00 EUR (85 %)" in page
    assert "A hard cap" in page
    chat = html.unescape(client.get("/").content.decode())
    assert 'class="spend-banner"' in chat
    assert "You have spent 8.50 EUR of your monthly spend limit of 10.00 EUR (85 %). At 100 % your requests" in chat
    spent(world, eur=1.0)
    assert 'class="spend-banner"' not in client.get("/").content.decode()  # below 80 %: no banner
    # Another member's month is not theirs to see: the page shows only their own.
    assert signed_in("demo").get("/settings/usage/mine/").status_code == 200


def test_admins_see_every_member_s_and_key_s_month_on_the_usage_page_and_its_csv(world: World) -> None:
    member_limit(world, "10")
    spent(world, eur=9.5)
    key, _ = keys.create_key(world.demo, "zapier", monthly_eur=Decimal("3"), hard_cap=False)
    spent(world, key=key, eur=1.5)
    admin = signed_in("demo")
    page = html.unescape(admin.get("/settings/usage/").content.decode())
    assert 'data-spend="member:mia"' in page and "9.50" in page and "95 %" in page
    assert 'data-spend="key:zapier (' in page
    csv = admin.get("/settings/usage/spend.csv").content.decode().splitlines()
    assert csv[0] == "month,kind,name,spent_eur,limit_eur,limit_mode,percent"
    assert any(line.split(",")[1:3] == ["member", "mia"] and line.endswith("10.00,hard,95") for line in csv)
    assert any(",key,zapier (" in line and line.endswith("3.00,alert,50") for line in csv)
    assert signed_in("mia").get("/settings/usage/spend.csv").status_code == 403
    # The other organisation's admin sees none of it.
    other = signed_in("mallory").get("/settings/usage/spend.csv").content.decode()
    assert "mia" not in other and "zapier" not in other


# A scheduled task counts against its owner; a worker's run rebuilds its ledger -------------------------------------


def test_a_scheduled_task_counts_against_its_owner_s_limit(world: World) -> None:
    from assistant.schedules import services as schedules
    from assistant.schedules.models import Execution, ScheduledTask

    task = ScheduledTask.objects.create(
        organisation=world.demo,
        owner=world.member,
        name="watch",
        prompt=QUESTION["text"],
        model="demo-large",
        level="rapide",
        resources=[],
        cost_cap_eur=Decimal("1"),
        schedule="0 7 * * *",
    )
    member_limit(world, "2")
    spent(world, eur=1.99)
    assert schedules.start_execution(task.pk, now=True) is None
    execution = Execution.objects.get(task=task)
    assert execution.run is None and "spend_limit_spent" in execution.refused
    assert not Run.objects.exists() and not SpendReservation.objects.exists()


async def test_a_worker_s_run_rebuilds_its_spend_ledger_and_takes_the_intake_hold_over(tworld: World) -> None:
    from assistant.budgets.ledger import BudgetLedgers
    from assistant.runs.start import read_start

    await sync_to_async(member_limit)(tworld, "5")
    ask = intake.Ask(text=QUESTION["text"], model="demo-large", level="rapide", resources=(), category="catalogue")
    run = (await sync_to_async(intake.create_run)(tworld.member, tworld.demo, None, ask)).run
    held = await SpendReservation.objects.aget(run=run)
    start = await sync_to_async(read_start)(run.pk)  # as a Celery worker reads it, with no admission
    assert start is not None and isinstance(start.ledger, BudgetLedgers)
    limited = start.ledger.ledgers[0]
    assert isinstance(limited, spend.SpendLedger) and limited.place.limit.eur == 5.0
    tokens = round(held.eur / spend.call_eur("demo-large", 10_000) * 10_000)  # about the same call
    first = await start.ledger.reserve("demo-large", tokens)
    assert isinstance(first, list) and first[0][1].pk == held.pk  # the intake's hold, not a second one
    assert await SpendReservation.objects.filter(run=run).acount() == 1
    await start.ledger.settle(first, "demo-large", None, 0.0)
    assert await sync_to_async(spend.release_run)(run.pk) == 0.0 and not await SpendReservation.objects.aexists()


def test_the_banner_says_whether_requests_are_refused_or_still_go_through(world: World) -> None:
    member_limit(world, "10", "alert")
    spent(world, eur=10.5)
    with translation.override("en"):
        alert = spend_state.banner_text(spend_state.state_for(world.demo, world.member.pk))
    assert alert.startswith("You have spent 10.50 EUR of your monthly spend limit of 10.00 EUR (105 %). It is an alert")
    member_limit(world, "10", "hard")
    with translation.override("fr"):
        hard = spend_state.banner_text(spend_state.state_for(world.demo, world.member.pk))
    assert "vos demandes sont refusées jusqu’à sa remise à zéro le 1" in hard and "10,50 EUR" in hard


def test_the_requests_csv_names_each_api_run_s_key(world: World) -> None:
    key, _ = keys.create_key(world.demo, "zapier")
    conversation = world.admin.conversations.create(organisation=world.demo, title="t")
    Run.objects.create(
        conversation=conversation, organisation=world.demo, user=world.admin, api_key=key, model="demo-large"
    )
    lines = signed_in("demo").get("/settings/usage.csv").content.decode().splitlines()
    assert lines[0].startswith("started,run,user,api_key,category,")
    assert lines[1].split(",")[3] == "zapier"


def test_the_audit_log_words_a_spend_limit_change_in_the_reader_s_language(world: World) -> None:
    admin = signed_in("demo")
    membership = Membership.objects.get(organisation=world.demo, user=world.member)
    prefix = f"m{membership.pk}"
    admin.post(
        f"/settings/members/{membership.pk}/limit", {f"{prefix}-limit_mode": "hard", f"{prefix}-monthly_eur": "7"}
    )
    admin.cookies["django_language"] = "fr"
    page = html.unescape(admin.get("/settings/audit/").content.decode())
    assert "a changé la limite de dépenses d’un membre" in page and "plafond strict" in page and "mia" in page
