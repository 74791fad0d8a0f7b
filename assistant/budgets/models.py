"""Task categories with their monthly token budgets, the month counters, temporary raises and alerts.

A run is charged to one ``Category``. Each category has one ``CategoryMonth`` per month (in the
organisation's time zone) holding what was used and what is reserved by calls in flight; a call
reserves there before it starts and settles after it ends (``ledger``), each hold also kept as a
``Reservation`` row so that one left by a dead process can be released. A ``BudgetRaise`` adds tokens
to one category until its end date, never taken from another one. A ``BudgetAlert`` records that a
category crossed a threshold in a month, once. A ``LandingAlert`` records that the agents of one model and
profile ended by forced landing or budget more often than the organisation's threshold in a month, once.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from assistant.orgs.models import Organisation
from assistant.orgs.translated import Translated

MAX_CATEGORIES = 4
# The most tokens a monthly budget or one raise may hold: a trillion, far above any month's use and far
# below what the database's 64-bit sums overflow at (a month's budget adds its raises).
MAX_BUDGET_TOKENS = 10**12
DEFAULT_THRESHOLDS = (80, 100)


def default_thresholds() -> list[int]:
    return list(DEFAULT_THRESHOLDS)


def validate_thresholds(value: object) -> None:
    if not isinstance(value, list) or not value or not all(isinstance(t, int) and 1 <= t <= 100 for t in value):
        raise ValidationError(_("Thresholds are percentages of the budget, from 1 to 100 (for instance 80, 100)."))


class Category(Translated):
    """A broad task category of an organisation, with its own monthly token budget."""

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="categories")
    slug = models.SlugField(max_length=40, help_text="What the composer, the API and scheduled tasks name it by.")
    name = models.CharField(max_length=100)
    monthly_tokens = models.PositiveBigIntegerField(
        validators=[MinValueValidator(1)], help_text="Tokens (input + output, agents included) per month."
    )
    is_default = models.BooleanField(default=False, help_text="Requests that name no category are charged here.")
    alert_thresholds = models.JSONField(
        default=default_thresholds,
        validators=[validate_thresholds],
        help_text="Percentages of the budget, e.g. [80, 100].",
    )
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organisation", "slug"], name="category_slug_per_org"),
            # Names differ in more than case: two "Synthèses" would be the same category to a reader.
            models.UniqueConstraint(
                Lower("name"),
                "organisation",
                name="category_name_per_org",
                violation_error_message=_("Another category already has this name."),
            ),
            models.UniqueConstraint(
                fields=["organisation"], condition=models.Q(is_default=True), name="one_default_category_per_org"
            ),
        ]
        ordering = ["organisation", "position", "pk"]
        verbose_name_plural = "categories"

    def __str__(self) -> str:
        return self.name


class CategoryMonth(models.Model):
    """One category's counters for one month: tokens used (settled) and reserved by calls in flight."""

    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="months")
    month = models.DateField(help_text="The month's first day, in the organisation's time zone.")
    used = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)
    cost_eur = models.FloatField(default=0.0)
    calls = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["category", "month"], name="one_counter_per_category_month")]
        ordering = ["-month", "category"]

    def __str__(self) -> str:
        return f"{self.category} {self.month:%Y-%m}"


class Reservation(models.Model):
    """Tokens held on a category's month by one model call in flight (or by a run's first call, from its intake
    until that call starts), until it settles.

    The month's ``reserved`` counter is what the budget check reads; these rows let a hold whose process died
    (a server stopped mid-call) be found and released instead of blocking the month: with its run's lease, when
    the reaper or ``recover_runs`` fails that run (``reservations.release_run``), else after ``STALE_AFTER``.
    """

    month = models.ForeignKey(CategoryMonth, on_delete=models.CASCADE, related_name="reservations")
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="reservations", db_index=True
    )
    tokens = models.BigIntegerField()
    created = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.tokens} on {self.month}"


class BudgetRaise(models.Model):
    """Tokens an admin added to one category's monthly budget, until its end date (included)."""

    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="raises")
    tokens = models.PositiveBigIntegerField(validators=[MinValueValidator(1)])
    reason = models.TextField()
    ends_on = models.DateField(help_text="Last day it applies, in the organisation's time zone.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    # The name stays when the account goes: who raised a budget is part of the record.
    created_by_name = models.CharField(max_length=150)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"+{self.tokens} on {self.category} until {self.ends_on}"


class Alert(models.Model):
    """What every alert keeps: to whom it was e-mailed, when, and which admin saw it on the usage page."""

    emailed_to = models.JSONField(default=list)
    created = models.DateTimeField(auto_now_add=True)
    seen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def mark_seen(self, user: User) -> None:
        """Note that ``user`` saw it, now; an alert seen before keeps its first reader."""
        if self.seen is None:
            self.seen, self.seen_by = timezone.now(), user
            self.save(update_fields=["seen", "seen_by"])


class BudgetAlert(Alert):
    """A category crossed one of its thresholds in a month; recorded (and emailed) once."""

    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="alerts")
    month = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    used = models.BigIntegerField()
    budget = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["category", "month", "threshold"], name="one_alert_per_threshold_month")
        ]
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.category} at {self.threshold} % ({self.month:%Y-%m})"


class LandingAlert(Alert):
    """In one month, a share of a model's (and profile's) agents above the organisation's threshold ended by forced
    landing or budget, over at least ``landings.MIN_AGENTS`` agents; recorded (and emailed) once."""

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="landing_alerts")
    month = models.DateField()
    model = models.CharField(max_length=100)
    profile = models.CharField(max_length=100, blank=True)
    agents = models.PositiveIntegerField()
    landed = models.PositiveIntegerField()
    threshold = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "month", "model", "profile"], name="one_landing_alert_per_line_month"
            )
        ]
        ordering = ["-created"]

    @property
    def percent(self) -> float:
        return 100.0 * self.landed / self.agents if self.agents else 0.0

    def __str__(self) -> str:
        return f"{self.model} {self.profile} at {self.percent:.0f} % ({self.month:%Y-%m})"


class SpendMonth(models.Model):
    """What one member (their chat runs and scheduled tasks) or one API key spent in one month, in EUR, while a spend
    limit applies to it: ``used_eur`` (settled) and ``reserved_eur`` (held by calls in flight), as ``CategoryMonth``
    counts tokens. Created at the first run under a limit in the month, from the cost of the month's runs so far."""

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="spend_months")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="spend_months"
    )
    api_key = models.ForeignKey(
        "orgs.ApiKey", null=True, blank=True, on_delete=models.CASCADE, related_name="spend_months"
    )
    month = models.DateField(help_text="The month's first day, in the organisation's time zone.")
    used_eur = models.FloatField(default=0.0)
    reserved_eur = models.FloatField(default=0.0)
    calls = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "user", "month"],
                condition=models.Q(api_key__isnull=True),
                name="one_spend_month_per_member",
            ),
            models.UniqueConstraint(
                fields=["api_key", "month"], condition=models.Q(api_key__isnull=False), name="one_spend_month_per_key"
            ),
            models.CheckConstraint(
                condition=models.Q(user__isnull=True, api_key__isnull=False)
                | models.Q(user__isnull=False, api_key__isnull=True),
                name="spend_month_of_a_member_or_a_key",
            ),
        ]
        ordering = ["-month"]

    def __str__(self) -> str:
        return f"{self.api_key or self.user} {self.month:%Y-%m}"


class SpendReservation(models.Model):
    """EUR held on a spend month by one model call in flight under a hard cap (or by a run's first call, from its
    intake until that call starts), until it settles; released with its run as ``Reservation`` is."""

    month = models.ForeignKey(SpendMonth, on_delete=models.CASCADE, related_name="reservations")
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="spend_reservations", db_index=True
    )
    eur = models.FloatField()
    created = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.eur:.4f} EUR on {self.month}"


class SpendAlert(Alert):
    """A member's or a key's month crossed a threshold of its spend limit (80 % or 100 %); recorded (and e-mailed to
    the admins and the member) once."""

    spend = models.ForeignKey(SpendMonth, on_delete=models.CASCADE, related_name="alerts")
    threshold = models.PositiveSmallIntegerField()
    used_eur = models.FloatField()
    limit_eur = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["spend", "threshold"], name="one_spend_alert_per_threshold")]
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.spend} at {self.threshold} %"
