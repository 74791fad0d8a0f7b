"""What the usage page and "My usage" show for one organisation and one month (in its time zone); the CSVs are
``usage_csv`` and ``spend_lines``.

Consumption against the budget comes from the category's counters (calls in flight included); the
breakdowns (per day, per model, per agent, carbon) come from the month's runs, each run's usage being
every call of its main model and its agents counted once.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.utils import formats
from django.utils.translation import gettext as _

from assistant.catalogue import snapshot
from assistant.engine.events import AgentFinished, AgentStarted
from assistant.engine.usage import RunUsage, UsageData
from assistant.orgs.dates import long_date
from assistant.orgs.models import AgentProfile, Organisation
from assistant.runs.models import Run, Step
from assistant.runs.steps import with_events
from assistant.runs.wording import demo_carbon_hint, status_text, with_demo_estimate
from assistant.runs.wording import grams as wording_grams

from . import spend_state
from .charts import PALETTE, Chart, Guide, Series
from .landings import MIN_AGENTS, landing_lines
from .models import BudgetAlert, LandingAlert
from .months import month_bounds, month_of, next_month, previous_month, zone
from .services import categories_of
from .spend_lines import spend_lines
from .state import CategoryState, state_of

# The cost-per-call chart covers the month and the two before it, so that a drift shows against its past.
DRIFT_MONTHS = 3


@dataclass(slots=True)
class Totals:
    """Runs and their usage (one ``RunUsage``: each call of their main models and agents once)."""

    runs: int = 0
    usage: RunUsage = field(default_factory=RunUsage)

    @property
    def calls(self) -> int:
        return self.usage.calls

    @property
    def prompt_tokens(self) -> int:
        return self.usage.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.usage.completion_tokens

    @property
    def cached_prompt_tokens(self) -> int:
        return self.usage.cached_prompt_tokens

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens

    @property
    def cost_eur(self) -> float:
        return self.usage.cost_eur

    @property
    def estimated_eur(self) -> float:
        """The part of ``cost_eur`` that was estimated (calls cut or aborted, their tokens counted locally)."""
        return self.usage.estimated_eur

    @property
    def energy_wh(self) -> float:
        return self.usage.energy_kwh * 1000

    @property
    def carbon_g(self) -> float:
        return self.usage.carbon_g

    @property
    def carbon_complete(self) -> bool:
        """Every call's carbon was estimated (else the carbon is a lower bound)."""
        return not self.calls or self.usage.carbon_estimated

    @property
    def carbon_text(self) -> str:
        """The carbon, or why there is none: never a made-up zero."""
        if not self.calls:
            return "—"
        grams = wording_grams(self.carbon_g, significant=3, above=10, decimals=0)
        if self.carbon_complete:
            return with_demo_estimate(_("%(grams)s g CO₂e") % {"grams": grams}, self.usage.by_model, short=True)
        if self.carbon_g:
            grams_text = _("at least %(grams)s g CO₂e") % {"grams": grams}
            return with_demo_estimate(grams_text, self.usage.by_model, short=True)
        return _("not estimated")

    @property
    def cost_per_call(self) -> float | None:
        return self.cost_eur / self.calls if self.calls else None

    def add_usage(self, usage: RunUsage | UsageData | dict[str, Any], sign: int = 1) -> None:
        """One run's (or one agent's) usage; a saved one as ``RunUsage.as_data`` makes it."""
        self.usage.merge(usage if isinstance(usage, RunUsage) else RunUsage.of(usage), sign)


@dataclass(slots=True)
class CategoryLine:
    state: CategoryState
    color: str
    totals: Totals
    previous: Totals

    @property
    def drift_percent(self) -> float | None:
        """How the cost per call moved since the previous month."""
        now, before = self.totals.cost_per_call, self.previous.cost_per_call
        if now is None or not before:
            return None
        return 100.0 * (now - before) / before


@dataclass(slots=True)
class AgentLine:
    model: str
    profile: str
    is_agent: bool
    agents: int = 0
    rounds: int = 0
    statuses: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    totals: Totals = field(default_factory=Totals)

    @property
    def status_text(self) -> str:
        """How many ended with each status, in the reader's words («terminé 5, arrêté 2»)."""
        return ", ".join(f"{status_text(status)} {count}" for status, count in sorted(self.statuses.items()))


def month_runs(org: Organisation, start: datetime, end: datetime) -> list[Run]:
    return list(
        Run.objects.filter(organisation=org, created__gte=start, created__lt=end)
        .select_related("user")
        .order_by("created")
    )


def _days(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days)]


def usage_report(org: Organisation, month: date, now: datetime) -> dict[str, Any]:
    tz = zone(org.time_zone)
    start, end = month_bounds(month, tz)
    first = month
    for _i in range(DRIFT_MONTHS - 1):
        first = previous_month(first)
    window = month_runs(org, month_bounds(first, tz)[0], end)
    runs = [r for r in window if r.created >= start]
    previous = [r for r in window if month_bounds(previous_month(month), tz)[0] <= r.created < start]
    categories = categories_of(org)
    colors = {c.slug: PALETTE[i % len(PALETTE)] for i, c in enumerate(categories)}

    lines = []
    for c in categories:
        totals, before = Totals(), Totals()
        for r in runs:
            if r.category == c.slug:
                totals.runs += 1
                totals.add_usage(r.usage)
        for r in previous:
            if r.category == c.slug:
                before.add_usage(r.usage)
        lines.append(CategoryLine(state_of(c, now, month), colors[c.slug], totals, before))

    by_model: dict[str, Totals] = defaultdict(Totals)
    for r in runs:
        for name, m in RunUsage.of(r.usage).by_model.items():
            by_model[name].add_usage(RunUsage({name: m}))
    overall = Totals(runs=len(runs))
    for r in runs:
        overall.add_usage(r.usage)

    today = now.astimezone(tz).date()
    month_days = _days(start.date(), end.date())
    shown_days = [d for d in month_days if d <= today] or month_days[:1]
    return {
        "month": month,
        "previous_month": previous_month(month),
        "next_month": None if end > now else end.astimezone(tz).date().replace(day=1),
        "time_zone": tz.key,
        "lines": lines,
        "overall": overall,
        "by_model": sorted(by_model.items()),
        "demo_carbon": demo_carbon_hint(by_model),
        "price_dates": _price_dates(by_model),
        "agents": _agent_lines(runs),
        "consumption_chart": _consumption_chart(lines, runs, month_days, shown_days, tz),
        "cost_chart": _cost_chart(lines, window, _days(month_bounds(first, tz)[0].date(), end.date()), today, tz),
        "alerts": BudgetAlert.objects.filter(category__organisation=org, month=month).select_related(
            "category", "seen_by"
        ),
        "runs_count": len(runs),
        "spend_lines": spend_lines(org, month),
        **landing_watch(org, month),
    }


def _price_dates(by_model: dict[str, Totals]) -> str:
    """When the catalogue recorded the prices the month's costs are priced at, in the reader's format (its models'
    dates, latest first); "" when none is known."""
    catalogue = snapshot.catalogue()
    dates = sorted({m.price_date for name in by_model if (m := catalogue.get(name)) and m.price_date}, reverse=True)
    return ", ".join(long_date(d) for d in dates)


def landing_watch(org: Organisation, month: date) -> dict[str, Any]:
    """The forced-landing watch of the usage page: each model and profile's share, the threshold, its alerts."""
    return {
        "landings": landing_lines(org, month),
        "landing_threshold": org.forced_landing_alert_percent,
        "landing_min_agents": MIN_AGENTS,
        "landing_alerts": LandingAlert.objects.filter(organisation=org, month=month).select_related("seen_by"),
        "profile_names": AgentProfile.shown_names(org.pk),
    }


def _consumption_chart(
    lines: list[CategoryLine], runs: list[Run], month_days: list[date], shown: list[date], tz: Any
) -> Chart:
    """Each category's cumulative tokens over the month, as a percentage of its budget."""
    index = {d: i for i, d in enumerate(month_days)}
    series = []
    for line in lines:
        per_day: dict[int, int] = defaultdict(int)
        for r in runs:
            if r.category == line.state.category.slug:
                per_day[index[r.created.astimezone(tz).date()]] += RunUsage.of(r.usage).total_tokens
        total, points = 0, []
        for d in shown:
            total += per_day.get(index[d], 0)
            points.append((index[d], 100.0 * total / line.state.budget))
        series.append(Series(line.state.category.shown_name, points, line.color))
    last = len(month_days) - 1
    return Chart(
        title=_("Consumption over the month, as a share of each category's budget"),
        x_labels=[str(d.day) for d in month_days],
        x_ticks=[i for i, d in enumerate(month_days) if d.day in (1, 5, 10, 15, 20, 25)],
        series=series,
        value_format=lambda v: f"{v:.0f} %",
        guides=[
            Guide(_("The budget (100 %)"), 0, 100.0, last, 100.0),
            Guide(_("An even pace over the month"), 0, 100.0 / len(month_days), last, 100.0),
        ],
    )


def _cost_chart(lines: list[CategoryLine], runs: list[Run], days: list[date], today: date, tz: Any) -> Chart:
    """Each category's average cost per model call, day by day: a drift shows in its category."""
    index = {d: i for i, d in enumerate(days)}
    series = []
    for line in lines:
        per_day: dict[int, Totals] = defaultdict(Totals)
        for r in runs:
            if r.category == line.state.category.slug:
                per_day[index[r.created.astimezone(tz).date()]].add_usage(r.usage)
        points = [(i, t.cost_per_call) for i, t in sorted(per_day.items()) if t.cost_per_call is not None]
        series.append(Series(line.state.category.shown_name, points, line.color))
    return Chart(
        title=_("Cost per model call (EUR), day by day, over three months"),
        x_labels=[d.strftime("%d/%m") for d in days],
        x_ticks=[i for i, d in enumerate(days) if d.day in (1, 15)],
        series=series,
        value_format=lambda v: formats.number_format(v, 4 if v < 0.1 else 2),
    )


def _agent_lines(runs: list[Run]) -> list[AgentLine]:
    """Agents grouped by model and profile, and the main models with what their agents did not spend."""
    steps = Step.objects.filter(run__in=[r.pk for r in runs], kind__in=["agent_started", "agent_finished"])
    profiles: dict[tuple[Any, str], str] = {}
    lines: dict[tuple[str, str], AgentLine] = {}
    agents_usage: dict[Any, RunUsage] = defaultdict(RunUsage)
    for s, e in with_events(steps.order_by("run_id", "seq")):
        key = (s.run_id, e.agent_id or "")
        if isinstance(e, AgentStarted):
            profiles[key] = e.profile or ""
        elif isinstance(e, AgentFinished):
            profile = profiles.get(key, "")
            line = lines.setdefault((e.model, profile), AgentLine(e.model, profile, True))
            line.agents += 1
            line.rounds += e.rounds
            line.statuses[e.status] += 1
            line.totals.add_usage(e.usage)
            agents_usage[s.run_id].merge(RunUsage.of(e.usage))
    main: dict[str, AgentLine] = {}
    for r in runs:
        line = main.setdefault(r.model, AgentLine(r.model, "", False))
        line.agents += 1
        line.rounds += r.rounds
        line.statuses[r.status] += 1
        line.totals.add_usage(r.usage)
        spent_by_agents = agents_usage.get(r.pk)
        if spent_by_agents is not None:
            # The run's usage counts its agents' calls once; the main model's line shows the rest.
            line.totals.add_usage(spent_by_agents, sign=-1)
    return [*(main[m] for m in sorted(main)), *(lines[k] for k in sorted(lines))]


def member_usage(org: Organisation, user_id: int, month: date, now: datetime) -> dict[str, Any]:
    """ "My usage": a member's month (their chat runs and scheduled tasks): spend, limit, by model, main model and
    agents."""
    tz = zone(org.time_zone)
    start, end = month_bounds(month, tz)
    runs = list(
        Run.objects.filter(organisation=org, user_id=user_id, api_key__isnull=True, created__gte=start, created__lt=end)
    )
    by_model: dict[str, Totals] = defaultdict(Totals)
    overall = Totals(runs=len(runs))
    for r in runs:
        overall.add_usage(r.usage)
        for name, m in RunUsage.of(r.usage).by_model.items():
            by_model[name].add_usage(RunUsage({name: m}))
    lines = _agent_lines(runs)
    main, agents = Totals(), Totals()
    for line in lines:
        (agents if line.is_agent else main).add_usage(line.totals.usage)
    current = month_of(now, tz) == month
    state = spend_state.state_for(org, user_id, now=now) if current else None
    return {
        "month": month,
        "previous_month": previous_month(month),
        "next_month": None if current else next_month(month),
        "time_zone": tz.key,
        "state": state,
        # While a limit applies, its month's counter (calls of running requests included); else the runs' cost.
        "spent_eur": state.used_eur if state is not None and state.limit is not None else overall.cost_eur,
        "banner": spend_state.banner_text(state) if state is not None else "",
        "overall": overall,
        "by_model": sorted(by_model.items()),
        "main": main,
        "agents": agents,
        "agent_lines": [line for line in lines if line.is_agent],
        "demo_carbon": demo_carbon_hint(by_model),
    }
