"""Each member's and each API key's month against its spend limit: the usage page's spend lines and their CSV."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import date

from django.db.models import Sum

from assistant.orgs.models import ApiKey, Membership, Organisation
from assistant.orgs.spending import SpendLimit, key_limit, member_limit
from assistant.runs.models import Run

from .models import SpendMonth
from .months import month_bounds, zone
from .usage_csv import csv_text


@dataclass(frozen=True, slots=True)
class SpendLine:
    """A member's or a key's month on the usage page and in its spend CSV."""

    kind: str
    """``member`` or ``key``."""
    name: str
    spent_eur: float
    limit: SpendLimit | None
    revoked: bool = False

    @property
    def percent(self) -> int | None:
        if self.limit is None or not self.limit.eur:
            return None
        return math.floor(100.0 * self.spent_eur / self.limit.eur)

    @property
    def level(self) -> str:
        """How close it is: ``over`` (100 % or more), ``warn`` (80 % or more), else ``ok``."""
        percent = self.percent
        if percent is None or percent < 80:
            return "ok"
        return "over" if percent >= 100 else "warn"


def spend_lines(org: Organisation, month: date) -> list[SpendLine]:
    """Every member's month (their chat runs and scheduled tasks) and every key's, with its limit: what the month's
    runs cost, or the month's counter while a limit applies (calls of running requests included)."""
    tz = zone(org.time_zone)
    start, end = month_bounds(month, tz)
    runs = Run.objects.filter(organisation=org, created__gte=start, created__lt=end).order_by()
    by_member = dict(
        runs.filter(api_key__isnull=True).values("user_id").annotate(eur=Sum("cost_eur")).values_list("user_id", "eur")
    )
    by_key = dict(
        runs.filter(api_key__isnull=False)
        .values("api_key_id")
        .annotate(eur=Sum("cost_eur"))
        .values_list("api_key_id", "eur")
    )
    counted = SpendMonth.objects.filter(organisation=org, month=month)
    member_rows = {r.user_id: r.used_eur for r in counted if r.api_key_id is None}
    key_rows = {r.api_key_id: r.used_eur for r in counted if r.api_key_id is not None}
    lines = []
    for m in Membership.objects.filter(organisation=org).select_related("user").order_by("user__username"):
        limit = member_limit(org, m)
        used = member_rows.get(m.user_id) if limit is not None else None
        spent = used if used is not None else float(by_member.get(m.user_id) or 0.0)
        lines.append(SpendLine("member", m.user.get_username(), spent, limit))
    for key in ApiKey.objects.filter(organisation=org).order_by("name", "pk"):
        limit = key_limit(key)
        used = key_rows.get(key.pk) if limit is not None else None
        spent = used if used is not None else float(by_key.get(key.pk) or 0.0)
        if key.revoked is not None and not spent:
            continue  # a revoked key that spent nothing this month is no line
        lines.append(SpendLine("key", f"{key.name} ({key.prefix}…)", spent, limit, key.revoked is not None))
    return lines


SPEND_CSV_COLUMNS = ["month", "kind", "name", "spent_eur", "limit_eur", "limit_mode", "percent"]


def spend_csv(org: Organisation, month: date) -> str:
    """One line per member and per API key: the month's spend against its limit."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SPEND_CSV_COLUMNS)
    for line in spend_lines(org, month):
        limit = line.limit
        writer.writerow(
            [
                f"{month:%Y-%m}",
                line.kind,
                csv_text(line.name),
                f"{line.spent_eur:.6f}",
                f"{limit.eur:.2f}" if limit is not None else "",
                ("hard" if limit.hard else "alert") if limit is not None else "",
                line.percent if line.percent is not None else "",
            ]
        )
    return out.getvalue()
