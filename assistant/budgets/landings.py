"""Forced landings watched: the share of agents that ended by forced landing or budget, per model and profile.

Seed 000: a rising rate of forced landings means scopes too wide. An agent *landed* when it ended
``interrupted`` (its budget, or its output cut at the cap) or on its forced landing round
(``AgentFinished.forced_landing``). The usage page shows each model and profile's share over the month with
its trend against the month before; ``check`` records (and emails) a ``LandingAlert`` once a month for a line
whose share passes the organisation's threshold (``Organisation.forced_landing_alert_percent``) over at least
``MIN_AGENTS`` agents. ``check`` runs when a run with agents ends (``on_run_saved``, connected in ``apps``), for
the lines of that run's agents (the only ones its end can move), counted from the few fields of the month's
agent steps they need (``_month_rows``), not from whole events.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, QuerySet
from django.utils import translation
from django.utils.translation import gettext as _

from assistant.engine.events import AgentFinished, AgentStarted
from assistant.orgs.models import Organisation
from assistant.orgs.services import admin_emails
from assistant.runs.ends import RunEnded
from assistant.runs.models import Run, Step
from assistant.runs.steps import AgentEnd, agent_ends, count_month_agent_ends, with_events

from .models import LandingAlert
from .months import month_bounds, month_of, previous_month, zone

log = logging.getLogger(__name__)

MIN_AGENTS = 20
"""Below this many agents of a line in a month, its share says too little to alert on."""


def landed(event: AgentFinished) -> bool:
    """The agent ended by forced landing or budget."""
    return event.status == "interrupted" or event.forced_landing


@dataclass(slots=True)
class LandingLine:
    """One model and profile's agents over a month, and over the month before."""

    model: str
    profile: str
    agents: int = 0
    landed: int = 0
    previous_agents: int = 0
    previous_landed: int = 0

    @property
    def percent(self) -> float | None:
        return 100.0 * self.landed / self.agents if self.agents else None

    @property
    def previous_percent(self) -> float | None:
        return 100.0 * self.previous_landed / self.previous_agents if self.previous_agents else None

    @property
    def trend_points(self) -> float | None:
        """How many percentage points the share moved since last month (None without both months)."""
        now, before = self.percent, self.previous_percent
        return None if now is None or before is None else now - before

    @property
    def share_text(self) -> str:
        """``24 % (↑ 9 pts)``: the month's share and its move since last month."""
        if self.percent is None:
            return "—"
        share = _("%(percent)s %%") % {"percent": f"{self.percent:.0f}"}
        points = self.trend_points
        if points is None:
            return _("%(share)s (no agent last month)") % {"share": share}
        rounded = round(points)
        if rounded == 0:
            return _("%(share)s (= last month)") % {"share": share}
        arrow = "↑" if rounded > 0 else "↓"
        return _("%(share)s (%(arrow)s %(points)s pts)") % {"share": share, "arrow": arrow, "points": abs(rounded)}

    def alerts_at(self, threshold: int) -> bool:
        return self.agents >= MIN_AGENTS and self.percent is not None and self.percent >= threshold


def finished_agents(steps: QuerySet[Step]) -> Iterator[tuple[Any, str, AgentFinished]]:
    """``(run id, profile, AgentFinished)`` for each agent that ended among ``steps``, read as typed events."""
    profiles: dict[tuple[Any, str], str] = {}
    rows = steps.filter(kind__in=["agent_started", "agent_finished"]).order_by("run_id", "seq")
    for s, event in with_events(rows):
        if isinstance(event, AgentStarted):
            profiles[(s.run_id, event.agent_id)] = event.profile or ""
        elif isinstance(event, AgentFinished):
            yield s.run_id, profiles.get((s.run_id, event.agent_id), ""), event


def _count(lines: dict[tuple[str, str], LandingLine], steps: QuerySet[Step], previous: bool) -> None:
    for _run, profile, event in finished_agents(steps):
        line = lines.setdefault((event.model, profile), LandingLine(event.model, profile))
        if previous:
            line.previous_agents += 1
            line.previous_landed += landed(event)
        else:
            line.agents += 1
            line.landed += landed(event)


def _month_steps(org: Organisation, month: date) -> QuerySet[Step]:
    start, end = month_bounds(month, zone(org.time_zone))
    return Step.objects.filter(run__organisation=org, run__created__gte=start, run__created__lt=end)


def landing_lines(org: Organisation, month: date) -> list[LandingLine]:
    """Each model and profile whose agents ran this month, with last month's figures for the trend."""
    lines: dict[tuple[str, str], LandingLine] = {}
    _count(lines, _month_steps(org, month), previous=False)
    _count(lines, _month_steps(org, previous_month(month)), previous=True)
    return [lines[k] for k in sorted(lines) if lines[k].agents]


# Alerts -------------------------------------------------------------------------------------------


def _month_rows(org_id: int, tz: ZoneInfo, month: date) -> Iterator[tuple[Any, str, str, bool]]:
    """``(run id, model, profile, landed)`` for each agent that ended in the organisation's month, from the few
    fields of its steps a line needs (``steps.agent_ends``), not whole events: a month holds every agent."""
    start, end = month_bounds(month, tz)
    steps = Step.objects.filter(run__organisation_id=org_id, run__created__gte=start, run__created__lt=end)
    for agent in agent_ends(steps):
        yield agent.run_id, agent.model, agent.profile, agent.status == "interrupted" or agent.forced_landing


def check(org: Organisation, month: date) -> list[LandingAlert]:
    """Record (and email) each line of the month past the organisation's threshold over enough agents, once."""
    threshold = org.forced_landing_alert_percent
    return _alert(org, month, [line for line in landing_lines(org, month) if line.alerts_at(threshold)])


def _alert(org: Organisation, month: date, due: list[LandingLine]) -> list[LandingAlert]:
    """Record (and email) the lines ``due`` that have no alert this month yet."""
    if not due:
        return []
    threshold = org.forced_landing_alert_percent
    known = set(LandingAlert.objects.filter(organisation=org, month=month).values_list("model", "profile"))
    alerts = []
    for line in due:
        if (line.model, line.profile) in known:
            continue
        try:
            with transaction.atomic():
                alerts.append(
                    LandingAlert.objects.create(
                        organisation=org,
                        month=month,
                        model=line.model,
                        profile=line.profile,
                        agents=line.agents,
                        landed=line.landed,
                        threshold=threshold,
                    )
                )
        except IntegrityError:
            pass  # another run's end recorded this line first: it is sent once
    if alerts:
        _email(org, alerts)
    return alerts


def _email(org: Organisation, alerts: list[LandingAlert]) -> None:
    recipients = admin_emails(org)
    if not recipients:
        return
    # The site's language: the email answers no one's request.
    with translation.override(settings.LANGUAGE_CODE):
        subject = _("%(org)s: agents end by forced landing or budget more often than %(threshold)s %%") % {
            "org": org.name,
            "threshold": alerts[0].threshold,
        }
        lines = [
            _("- %(model)s%(profile)s: %(landed)s of %(agents)s agents this month (%(percent)s %%)")
            % {
                "model": a.model,
                "profile": _(", profile “%(name)s”") % {"name": a.profile} if a.profile else "",
                "landed": a.landed,
                "agents": a.agents,
                "percent": f"{a.percent:.0f}",
            }
            for a in alerts
        ]
        body = (
            _(
                "In %(org)s, these agents ended by forced landing or budget (interrupted) more often than the "
                "threshold of %(threshold)s %%:"
            )
            % {"org": org.name, "threshold": alerts[0].threshold}
            + "\n"
            + "\n".join(lines)
            + "\n"
            + _(
                "A rising rate of forced landings means scopes too wide: give these agents narrower resources or "
                "more precise instructions. The usage page shows the share per model and profile.\n"
            )
        )
    try:
        send_mail(subject, body, None, recipients)
    except Exception:
        # A mail server that is down must not fail the run that crossed the threshold.
        log.exception("could not email the forced-landing alert of organisation %s", org.pk)
        return
    LandingAlert.objects.filter(pk__in=[a.pk for a in alerts]).update(emailed_to=recipients)


def open_alerts(org: Organisation) -> QuerySet[LandingAlert]:
    """Forced-landing alerts no admin has marked as seen yet."""
    return LandingAlert.objects.filter(organisation=org, seen__isnull=True)


def _check_run(run_id: Any, known: tuple[int, Any, str, int] | None = None, ends: list[AgentEnd] | None = None) -> None:
    """Check the lines of the run's agents, the only ones its end can have moved, and only those with no alert yet
    this month. Before the month's agents are read, one count says whether the lines could alert at all: a line
    alerts with at least ``MIN_AGENTS`` agents of which the threshold's share landed, so with fewer landed agents
    of those models in the month than that share of ``MIN_AGENTS``, none can. A run with no agent costs one query.
    ``known``: the run's organisation, creation time, the organisation's time zone and threshold, when the saved
    run had them; ``ends``: its agents that ended, when its execution said (else read from its steps)."""
    if ends is None:
        ends = list(agent_ends(Step.objects.filter(run_id=run_id)))
    mine = {(agent.model, agent.profile) for agent in ends}
    if not mine:
        return
    found = known or (
        Run.objects.filter(pk=run_id)
        .values_list(
            "organisation_id", "created", "organisation__time_zone", "organisation__forced_landing_alert_percent"
        )
        .first()
    )
    if found is None:
        return
    org_id, created, time_zone, threshold = found
    tz = zone(time_zone)
    month = month_of(created, tz)
    mine -= _alerted(org_id, month)
    if not mine:
        return
    start, end = month_bounds(month, tz)
    models = sorted({model for model, _profile in mine})
    landed_agents = count_month_agent_ends(
        org_id, start, end, models=models, status_in=["interrupted"], or_forced_landing=True
    )
    if landed_agents < math.ceil(MIN_AGENTS * threshold / 100):
        return
    lines = {key: LandingLine(*key) for key in mine}
    for _run, model, profile, was_landed in _month_rows(org_id, tz, month):
        line = lines.get((model, profile))
        if line is not None:
            line.agents += 1
            line.landed += was_landed
    due = [lines[key] for key in sorted(mine) if lines[key].alerts_at(threshold)]
    if due:
        _alert(Organisation.objects.get(pk=org_id), month, due)


def _alerted(org_id: int, month: date) -> set[tuple[str, str]]:
    """The lines of the organisation's month that have their alert already (``(model, profile)``), in one plain
    statement: a run's end reads it."""
    quote = connection.ops.quote_name
    month_field = LandingAlert._meta.get_field("month")
    assert isinstance(month_field, Field)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT model, profile FROM {quote(LandingAlert._meta.db_table)} WHERE organisation_id = %s AND month = %s",
            [org_id, month_field.get_db_prep_value(month, connection)],
        )
        return {(str(model), str(profile)) for model, profile in cursor.fetchall()}


def on_run_ended(sender: type[RunEnded], end: RunEnded, **kwargs: Any) -> None:
    """A run ended: check its month's shares once its end is committed (never failing it); a run with no agent is
    told by the first query (``_check_run``), or by its end (``RunEnded.agent_ends``)."""
    run = end.run
    run_id = run.pk
    known = None
    if Run.organisation.is_cached(run):
        org = run.organisation
        known = (org.pk, run.created, org.time_zone, org.forced_landing_alert_percent)
    ends = None if end.agent_ends is None else list(end.agent_ends)
    if ends == []:
        return  # no agent ended in it: nothing to check
    transaction.on_commit(lambda: _check_run(run_id, known, ends), robust=True)
