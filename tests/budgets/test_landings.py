"""Forced landings watched: the usage page's share of agents that ended by forced landing or budget, per model and
profile, with its trend; an alert (page and e-mail) once a month past the admin's threshold over at least 20 agents;
the CSV's column. Runs are saved as executed runs save them: their steps through the recorder, then their end."""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core import mail
from django.utils import timezone

from assistant.budgets.landings import MIN_AGENTS, _month_rows, landing_lines
from assistant.budgets.models import LandingAlert
from assistant.budgets.months import month_bounds, month_of, previous_month, zone
from assistant.engine.events import AgentFinished, AgentStarted, AgentStatus
from assistant.engine.usage import UsageData
from assistant.orgs.models import Organisation
from assistant.runs import ends
from assistant.runs.ends import RunEnded
from assistant.runs.models import Conversation, Run, Step
from assistant.runs.recorder import Recorder
from assistant.runs.steps import AgentEnd, agent_ends, count_month_agent_ends
from tests.budgets.budgets_support import World, signed_in

Agent = tuple[str, str, AgentStatus, bool]
"""(model, profile, status, forced_landing)"""

OK: Agent = ("demo-small", "", "ok", False)
BUDGET: Agent = ("demo-small", "", "interrupted", False)
FORCED_ERROR: Agent = ("demo-small", "", "error", True)


def saved_run(
    org: Organisation, agents: Sequence[Agent], created: datetime | None = None, from_memory: bool = False
) -> Run:
    """A run whose agents' steps go through the recorder, then that ends as an executed run does."""
    user = get_user_model().objects.filter(memberships__organisation=org).first()
    assert user is not None
    conversation = Conversation.objects.create(organisation=org, user=user, title="t")
    run = Run.objects.create(conversation=conversation, organisation=org, user=user, model="demo-large")
    if created is not None:
        Run.objects.filter(pk=run.pk).update(created=created)

    async def record() -> None:
        recorder = Recorder(run.pk)
        for i, (model, profile, status, forced) in enumerate(agents, 1):
            agent_id = f"agent-{i}"
            await recorder.emit(
                AgentStarted(
                    agent_id=agent_id,
                    instruction="Find the invoices.",
                    model=model,
                    model_label=model,
                    resources=("kb:factures",),
                    profile=profile or None,
                    max_rounds=5,
                )
            )
            await recorder.emit(
                AgentFinished(
                    agent_id=agent_id,
                    model=model,
                    status=status,
                    reason="round budget reached" if status == "interrupted" else "",
                    rounds=5,
                    seconds=1.0,
                    cost_eur=0.001,
                    usage=UsageData(),
                    report="Found.",
                    forced_landing=forced,
                )
            )
        await recorder.close()
        seen.extend(recorder.agent_ends)

    seen: list[AgentEnd] = []
    async_to_sync(record)()
    run.refresh_from_db()
    run.status, run.finished = "ok", timezone.now()
    run.save()
    # Its end, as the execution tells it: with the agents it saw (``from_memory``: its steps are not read back).
    ends.announce(RunEnded(run, tuple(seen) if from_memory else None, False))
    return run


def last_month(org: Organisation) -> datetime:
    tz = zone(org.time_zone)
    return month_bounds(previous_month(month_of(timezone.now(), tz)), tz)[0] + timedelta(days=10)


def usage_page(username: str = "demo") -> str:
    return html.unescape(signed_in(username).get("/settings/usage/").content.decode())


def landings_section(page: str) -> str:
    """The section's HTML without its cells' labels (what a phone shows before each value)."""
    return re.sub(r' data-label="[^"]*"', "", page.split('<section id="landings"')[1].split("</section>")[0])


def test_the_usage_page_shows_each_model_and_profiles_share_and_its_trend(world: World) -> None:
    before = last_month(world.demo)
    saved_run(world.demo, [OK] * 9 + [BUDGET], created=before)  # last month: 10 %
    saved_run(world.demo, [OK] * 4 + [BUDGET, BUDGET])
    saved_run(world.demo, [OK] * 3 + [FORCED_ERROR])  # this month: 3 of 10, 30 %
    verified: Agent = ("demo-small", "verifier", "ok", False)
    forced: Agent = ("demo-small", "verifier", "interrupted", True)
    saved_run(world.demo, [verified] * 3 + [forced])
    saved_run(world.demo, [("demo-large", "", "ok", False)] * 2)
    saved_run(world.other, [BUDGET] * 5)  # another organisation's agents are not counted

    section = landings_section(usage_page())
    rows = [r.split("</tr>")[0] for r in section.split("<tr")[2:]]
    assert rows == [
        '><td>demo-large</td><td>—</td><td>2</td><td>0</td><td class="share">0 % (no agent last month)</td>',
        '><td>demo-small</td><td>—</td><td>10</td><td>3</td><td class="share">30 % (↑ 20 pts)</td>',
        '><td>demo-small</td><td>verifier</td><td>4</td><td>1</td><td class="share">25 % (no agent last month)</td>',
    ]
    # Last month's page: its own share, against the month before it (which had none).
    month = previous_month(month_of(timezone.now(), zone(world.demo.time_zone)))
    page = html.unescape(signed_in("demo").get(f"/settings/usage/?month={month:%Y-%m}").content.decode())
    assert "10 % (no agent last month)" in landings_section(page)
    theirs = landings_section(usage_page("mallory"))
    assert "<td>demo-small</td><td>—</td><td>5</td><td>5</td>" in theirs and "<td>10</td>" not in theirs


def test_the_trend_says_a_fall_and_no_change(world: World) -> None:
    before = last_month(world.demo)
    saved_run(world.demo, [OK] * 5 + [BUDGET] * 5, created=before)  # 50 %
    saved_run(world.demo, [OK] * 8 + [BUDGET] * 2)  # 20 %: down 30 points
    saved_run(world.demo, [("demo-large", "", "ok", False)] * 2, created=before)
    saved_run(world.demo, [("demo-large", "", "ok", False)] * 3)
    section = landings_section(usage_page())
    assert "20 % (↓ 30 pts)" in section
    assert "0 % (= last month)" in section


def test_the_share_uses_the_readers_language(world: World) -> None:
    saved_run(world.demo, [OK] * 3 + [BUDGET])
    client = signed_in("demo")
    client.cookies["django_language"] = "fr"
    page = html.unescape(client.get("/settings/usage/", HTTP_ACCEPT_LANGUAGE="fr").content.decode())
    section = landings_section(page)
    assert "Atterrissages forcés" in section
    assert "25 % (aucun agent le mois dernier)" in section


def test_the_alert_fires_once_at_the_threshold_over_twenty_agents(
    world: World, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    assert world.demo.forced_landing_alert_percent == 20  # the default
    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [BUDGET] * (MIN_AGENTS - 1))  # every agent landed, but only 19 of them
    assert not LandingAlert.objects.exists() and not mail.outbox
    assert "ended by forced landing or budget: above" not in usage_page()

    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [OK])  # the 20th agent: 19 of 20 landed
    alert = LandingAlert.objects.get()
    assert (alert.model, alert.profile, alert.agents, alert.landed, alert.threshold) == ("demo-small", "", 20, 19, 20)
    [message] = mail.outbox
    assert message.to == ["demo@example.com"]
    assert "forced landing or budget" in message.subject and "Demo Company" in message.subject
    assert "demo-small: 19 of 20 agents this month (95 %)" in message.body
    assert alert.emailed_to == ["demo@example.com"]

    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [BUDGET] * 3)  # still above: no second alert this month
    assert LandingAlert.objects.count() == 1 and len(mail.outbox) == 1

    page = usage_page()
    assert "19 of 20 agents of demo-small ended by forced landing or budget: above 20 %." in page
    assert "emailed to demo@example.com" in page
    assert '<tr class="over"><td>demo-small</td><td>—</td><td>23</td><td>22</td>' in landings_section(page)
    header = signed_in("demo").get("/").content.decode()
    assert 'class="badge alerts"' in header and ">1</span>" in header
    assert 'class="badge alerts"' not in signed_in("mallory").get("/").content.decode()
    assert signed_in("mallory").post(f"/settings/usage/landing-alerts/{alert.pk}/seen").status_code == 404
    assert signed_in("mia").post(f"/settings/usage/landing-alerts/{alert.pk}/seen").status_code == 403
    response = signed_in("demo").post(f"/settings/usage/landing-alerts/{alert.pk}/seen")
    assert response.status_code == 302
    alert.refresh_from_db()
    assert alert.seen is not None and alert.seen_by == world.admin
    assert 'class="badge alerts"' not in signed_in("demo").get("/").content.decode()


def test_no_alert_below_the_threshold_nor_for_a_line_of_fewer_than_twenty(
    world: World, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [OK] * 17 + [BUDGET] * 3)  # 20 agents, 15 %
        saved_run(world.demo, [("demo-small", "verifier", "interrupted", True)] * 10)  # 100 %, but 10 agents
    assert not LandingAlert.objects.exists() and not mail.outbox


def test_the_admin_sets_the_threshold_on_the_budgets_page(
    world: World, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    admin = signed_in("demo")
    page = admin.get("/settings/budgets/").content.decode()
    assert 'name="landing-forced_landing_alert_percent"' in page and 'value="20"' in page
    for bad in ("0", "101", "x", ""):
        response = admin.post("/settings/budgets/forced-landings", {"landing-forced_landing_alert_percent": bad})
        assert response.status_code == 422 and "A percentage from 1 to 100." in response.content.decode()
    assert (
        signed_in("mia")
        .post("/settings/budgets/forced-landings", {"landing-forced_landing_alert_percent": "5"})
        .status_code
        == 403
    )
    assert (
        admin.post("/settings/budgets/forced-landings", {"landing-forced_landing_alert_percent": "50"}).status_code
        == 302
    )
    world.demo.refresh_from_db()
    assert world.demo.forced_landing_alert_percent == 50
    world.other.refresh_from_db()
    assert world.other.forced_landing_alert_percent == 20

    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [OK] * 12 + [BUDGET] * 8)  # 40 %: below 50
    assert not LandingAlert.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [BUDGET] * 4)  # 12 of 24: 50 %
    assert LandingAlert.objects.get().threshold == 50
    assert "Alert at 50 % over at least 20 agents." in usage_page()


def test_the_csv_counts_each_runs_agents_that_landed(world: World) -> None:
    landed = saved_run(world.demo, [OK, BUDGET, FORCED_ERROR])
    calm = saved_run(world.demo, [OK, OK])
    response = signed_in("demo").get("/settings/usage.csv")
    rows = {r["run"]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}
    assert rows[str(landed.pk)]["agents"] == "3" and rows[str(landed.pk)]["forced_landings"] == "2"
    assert rows[str(calm.pk)]["agents"] == "2" and rows[str(calm.pk)]["forced_landings"] == "0"


@pytest.mark.parametrize("status", ["stopped", "error"])
def test_a_stopped_or_failed_agent_did_not_land(world: World, status: AgentStatus) -> None:
    saved_run(world.demo, [OK, ("demo-small", "", status, False)])
    assert "0 % (no agent last month)" in landings_section(usage_page())


def test_the_end_of_a_run_counts_its_lines_as_the_usage_page_does(world: World) -> None:
    """The check at a run's end reads only a few fields of the month's agent steps: its lines' figures are the
    usage page's, profile by profile, a forced landing that failed included; last month's agents are not counted."""
    verifier: Agent = ("demo-small", "verifier", "interrupted", False)
    other_model: Agent = ("demo-large", "", "interrupted", True)
    saved_run(world.demo, [OK, BUDGET, FORCED_ERROR, verifier])
    saved_run(world.demo, [OK, verifier, other_model, ("demo-small", "verifier", "ok", False)])
    saved_run(world.demo, [BUDGET, verifier], created=last_month(world.demo))
    saved_run(world.other, [BUDGET])
    month = month_of(timezone.now(), zone(world.demo.time_zone))
    page = {(line.model, line.profile): (line.agents, line.landed) for line in landing_lines(world.demo, month)}
    assert page == {("demo-small", ""): (4, 2), ("demo-small", "verifier"): (3, 2), ("demo-large", ""): (1, 1)}
    counted: dict[tuple[str, str], tuple[int, int]] = {}
    for _run, model, profile, landed in _month_rows(world.demo.pk, zone(world.demo.time_zone), month):
        agents, landings = counted.get((model, profile), (0, 0))
        counted[(model, profile)] = (agents + 1, landings + landed)
    assert counted == page


def test_agents_that_failed_on_their_forced_landing_round_alert_too(
    world: World, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    """Landed agents counted by the database before the month is read: a forced landing counts whatever the status."""
    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [OK] * 15 + [FORCED_ERROR] * 4)
    assert not LandingAlert.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [FORCED_ERROR])  # 5 of 20: 25 %
    alert = LandingAlert.objects.get()
    assert (alert.agents, alert.landed) == (20, 5)


def test_the_agents_the_recorder_saw_are_those_its_steps_say(world: World) -> None:
    """What the execution hands the run's end (``Recorder.agent_ends``) is what ``steps.agent_ends`` reads back."""
    agents = [OK, ("demo-large", "verificateur", "interrupted", True), FORCED_ERROR]
    heard: list[RunEnded] = []

    def hear(sender: Any, end: RunEnded, **kwargs: Any) -> None:
        heard.append(end)

    ends.run_ended.connect(hear)
    try:
        run = saved_run(world.demo, agents, from_memory=True)
    finally:
        ends.run_ended.disconnect(hear)
    from_steps = list(agent_ends(run.steps.all()))
    assert [(a.model, a.profile, a.status, a.forced_landing) for a in from_steps] == [
        (m, p, s, f) for m, p, s, f in agents
    ]
    [end] = heard
    assert end.agent_ends is not None and list(end.agent_ends) == from_steps


def test_a_run_that_says_its_agents_alerts_as_one_read_from_its_steps(
    world: World, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    """The forced-landing alert comes the same when the run's end is handed its agents (``from_memory``)."""
    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [BUDGET] * (MIN_AGENTS - 1))
    assert not LandingAlert.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        saved_run(world.demo, [OK], from_memory=True)  # the 20th agent, said by the run's end: 19 of 20 landed
    alert = LandingAlert.objects.get()
    assert (alert.model, alert.agents, alert.landed) == ("demo-small", 20, 19)


def _counts_as_the_events_say(world: World) -> None:
    """The run's end counts a month's landed agents in one plain statement (``count_month_agent_ends``): the same
    count as the agents' events say, per model, status and forced landing, the month's bounds and the organisation
    kept."""
    before = last_month(world.demo)
    saved_run(world.demo, [BUDGET, BUDGET, OK], created=before)  # last month: not counted
    saved_run(world.demo, [OK, BUDGET, FORCED_ERROR, ("demo-small", "verifier", "interrupted", True)])
    saved_run(world.demo, [("demo-large", "", "interrupted", False), ("demo-large", "", "ok", True), OK])
    other = Organisation.objects.create(name="Other", slug="other-landings")
    get_user_model().objects.get(username="demo").memberships.create(organisation=other)
    saved_run(other, [BUDGET, BUDGET])  # another organisation's: not counted
    tz = zone(world.demo.time_zone)
    start, end = month_bounds(month_of(timezone.now(), tz), tz)
    ends = [a for a in _month_rows(world.demo.pk, tz, month_of(timezone.now(), tz))]
    assert len(ends) == 7

    def expected(models: set[str], statuses: set[str], forced: bool) -> int:
        rows = list(agent_ends(Step.objects.filter(run__organisation=world.demo, run__created__gte=start)))
        return sum(1 for a in rows if a.model in models and (a.status in statuses or (forced and a.forced_landing)))

    for models in ({"demo-small"}, {"demo-large"}, {"demo-small", "demo-large"}, {"nothing"}):
        for statuses, forced in (({"interrupted"}, True), ({"interrupted"}, False), (set(), True), ({"ok"}, False)):
            counted = count_month_agent_ends(
                world.demo.pk, start, end, models=sorted(models), status_in=sorted(statuses), or_forced_landing=forced
            )
            assert counted == expected(models, statuses, forced), (models, statuses, forced)
    assert count_month_agent_ends(world.demo.pk, start, end, models=["demo-small"]) == 0  # no status asked


def test_the_run_s_end_counts_the_month_s_landed_agents_as_their_events_say(world: World) -> None:
    _counts_as_the_events_say(world)


@pytest.mark.postgres
def test_the_run_s_end_counts_the_month_s_landed_agents_as_their_events_say_on_postgresql(world: World) -> None:
    from django.db import connection

    assert connection.vendor == "postgresql"
    _counts_as_the_events_say(world)
