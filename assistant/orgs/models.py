"""Organisations, their members and their policy. Every object of the product belongs to one organisation.

The policy an admin sets (allowed models, reasoning levels, the parallel-agent cap, agent profiles)
is stored here; ``services.policy_for`` turns it into the engine's ``Policy`` for each run.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from assistant.catalogue import snapshot
from assistant.engine.policy import DEFAULT_LEVELS, LEVELS, RESOURCE_KINDS
from assistant.engine.types import EFFORTS

from .translated import Translated

MAX_PARALLEL_AGENTS = 4
MAX_MAIN_ROUNDS = 50
MAX_AGENT_ROUNDS = 20
# Delegation starts at Approfondi: below it, the agents tool is ignored whatever is stored.
DELEGATING_LEVELS = ("approfondi", "maximal")
LEVEL_CHOICES = [(lv, lv.capitalize()) for lv in LEVELS]
EFFORT_LABELS = {"minimal": _("Minimal"), "low": _("Low"), "medium": _("Medium"), "high": _("High")}
EFFORT_CHOICES = [("", _("None (the provider's default)")), *((e, EFFORT_LABELS[e]) for e in EFFORTS)]
# A spend limit (a member's or an API key's monthly EUR) is an alert (e-mails and a banner) or a hard cap (requests
# refused, a running one stopped); its counters and checks are the budgets app's (``budgets.spend``).
LIMIT_MODES = [("hard", _("Hard cap")), ("alert", _("Alert only"))]
MAX_MONTHLY_EUR = Decimal("1000000")
_EUR_VALIDATORS = [MinValueValidator(Decimal("0.01")), MaxValueValidator(MAX_MONTHLY_EUR)]
KIND_CHOICES = [("kb", _("Knowledge bases")), ("web", _("Web")), ("code", _("Code")), ("mcp", _("Connectors"))]


def validate_time_zone(value: str) -> None:
    if value not in zoneinfo.available_timezones():
        raise ValidationError(
            _("“%(value)s” is not a time zone (Europe/Paris, America/New_York, UTC…)."), params={"value": value}
        )


class Organisation(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    # None: the whole catalogue; else the list of model ids the assistant may use.
    allowed_models = models.JSONField(null=True, blank=True)
    max_parallel_agents = models.PositiveSmallIntegerField(
        default=MAX_PARALLEL_AGENTS,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_PARALLEL_AGENTS)],
        help_text=f"Agents of one request running at once (1 to {MAX_PARALLEL_AGENTS}).",
    )
    # Monthly budgets reset at midnight on the 1st in this time zone.
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])
    # The usage page alerts when this share of a model's (and profile's) agents in a month ended by forced
    # landing or budget (seed 000: a rising rate means scopes too wide).
    forced_landing_alert_percent = models.PositiveSmallIntegerField(
        default=20,
        db_default=20,  # rows written by code that predates the field (an old migration's state) get it too
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Alert when this share (%) of a model's agents in a month ended by forced landing or budget.",
    )
    # Every member's spend limit per month (their chat runs and scheduled tasks), unless a member has their own.
    member_monthly_eur = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        validators=_EUR_VALIDATORS,
        help_text="Each member's spend limit per month in EUR; empty: none.",
    )
    member_limit_mode = models.CharField(max_length=5, choices=LIMIT_MODES, default="hard", db_default="hard")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(max_parallel_agents__gte=1, max_parallel_agents__lte=MAX_PARALLEL_AGENTS),
                name="parallel_agents_1_to_4",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        allowed = self.allowed_models
        if allowed is not None and (not isinstance(allowed, list) or not all(isinstance(m, str) for m in allowed)):
            raise ValidationError({"allowed_models": "Empty for the whole catalogue, else a list of model ids."})


class Membership(models.Model):
    ROLES = [("admin", "Admin"), ("member", "Member")]

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=ROLES, default="member")
    # The member's own spend limit, over the organisation's default: "" keeps the default, "none" exempts them,
    # "hard" or "alert" with ``monthly_eur``.
    limit_mode = models.CharField(
        max_length=7,
        choices=[("", _("The organisation's default")), ("none", _("No limit")), *LIMIT_MODES],
        default="",
        db_default="",
        blank=True,
    )
    monthly_eur = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True, validators=_EUR_VALIDATORS
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organisation", "user"], name="one_membership_per_org"),
            models.CheckConstraint(
                condition=~models.Q(limit_mode__in=["hard", "alert"]) | models.Q(monthly_eur__isnull=False),
                name="member_limit_has_amount",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organisation} ({self.role})"


class ReasoningLevel(models.Model):
    """One reasoning level of an organisation; a level without a row keeps ``DEFAULT_LEVELS``."""

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="reasoning_levels")
    level = models.CharField(max_length=12, choices=LEVEL_CHOICES)
    effort = models.CharField(
        max_length=10, choices=EFFORT_CHOICES, blank=True, help_text="The reasoning effort asked of the provider."
    )
    main_rounds = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_MAIN_ROUNDS)],
        help_text="Tool rounds of the main model before it must answer.",
    )
    agent_rounds = models.PositiveSmallIntegerField(
        validators=[MaxValueValidator(MAX_AGENT_ROUNDS)],
        help_text="Turn budget of each sub-agent; 0 = no agents at this level (always 0 below Approfondi).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organisation", "level"], name="one_setting_per_level"),
            models.CheckConstraint(condition=models.Q(main_rounds__gte=1), name="main_rounds_at_least_1"),
            models.CheckConstraint(
                condition=models.Q(agent_rounds__lte=MAX_AGENT_ROUNDS), name="agent_rounds_at_most_20"
            ),
        ]
        ordering = ["organisation", "pk"]

    def __str__(self) -> str:
        return f"{self.organisation}: {self.get_level_display()}"

    @classmethod
    def default(cls, organisation: Organisation, level: str) -> ReasoningLevel:
        """An unsaved row holding the engine's default for ``level``."""
        d = DEFAULT_LEVELS[level]  # type: ignore[index]  # level is a saved str; a bad one raises KeyError, as intended
        return cls(
            organisation=organisation,
            level=level,
            effort=d.effort or "",
            main_rounds=d.main_rounds,
            agent_rounds=d.agent_rounds,
        )

    def clean(self) -> None:
        if self.level not in DELEGATING_LEVELS and self.agent_rounds:
            raise ValidationError({"agent_rounds": "Below Approfondi there are no agents: the budget stays 0."})


class AgentProfile(Translated):
    """A named agent profile a delegation can name: its instructions, default model and resource kinds. Its name is
    what the main model gives (as written); ``translations`` may word it in other languages for the pages."""

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="agent_profiles")
    name = models.CharField(
        max_length=60,
        validators=[RegexValidator(r"^[\w][\w .-]*$", "Letters, digits, spaces and . _ - only.")],
        help_text="The name the main model gives when it delegates to this profile.",
    )
    instructions = models.TextField(help_text="Added to the agent's system prompt.")
    default_model = models.CharField(
        max_length=100, blank=True, help_text="Used when a delegation names this profile but no model."
    )
    tools = models.JSONField(default=list, help_text="Kinds of resources it may receive: kb, web, code.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organisation", "name"], name="profile_name_per_org")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def shown_names(cls, organisation_id: int) -> dict[str, str]:
        """The organisation's profiles worded in other languages: each one's name to its name in the reader's
        language (a profile without other words is shown as written: absent here)."""
        profiles = cls.objects.filter(organisation_id=organisation_id).only("name", "translations")
        return {p.name: p.shown_name for p in profiles if p.translations}

    def clean(self) -> None:
        # The catalogue as users are offered it (database entries with a key, and the demo models).
        errors: dict[str, str] = {}
        tools = self.tools
        if not isinstance(tools, list) or not tools or any(t not in RESOURCE_KINDS for t in tools):
            errors["tools"] = f"At least one of {', '.join(RESOURCE_KINDS)}."
        if self.default_model and self.default_model not in snapshot.catalogue():
            errors["default_model"] = f"'{self.default_model}' is not in the model catalogue."
        if errors:
            raise ValidationError(errors)


class ApiKey(models.Model):
    """An organisation's key for the API. Only a digest of the secret is stored: it is shown once.

    ``allowed_models`` restricts what the key may use; None keeps the whole catalogue (the API does
    not inherit the restriction an admin set on the assistant: a key carries its own).
    """

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters of the key, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    allowed_models = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    # From this moment on the key opens nothing; None: it never expires. A rotated key's is the end of
    # its grace period (or its own expiry, if sooner).
    expires = models.DateTimeField(null=True, blank=True)
    # Requests per minute; None: the server's default (API_KEY_RATE_LIMIT).
    rate_limit = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    rotated = models.DateTimeField(null=True, blank=True)
    replaced_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The key's spend limit per month in EUR (its requests count against it only); None: none.
    monthly_eur = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True, validators=_EUR_VALIDATORS
    )
    limit_mode = models.CharField(max_length=5, choices=LIMIT_MODES, default="hard", db_default="hard")

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def is_usable(self, now: datetime | None = None) -> bool:
        """Not revoked, not expired (a rotated key within its grace period still is)."""
        return self.revoked is None and (self.expires is None or self.expires > (now or timezone.now()))

    @property
    def is_active(self) -> bool:
        return self.is_usable()

    @property
    def is_expired(self) -> bool:
        return self.revoked is None and not self.is_usable()

    @property
    def requests_per_minute(self) -> int:
        return self.rate_limit or settings.API_KEY_RATE_LIMIT


class AuditEntry(models.Model):
    """One admin change of an organisation: who, when, what (an action code, worded at display), on what.

    ``actor_name`` keeps the name when the user is deleted; ``details`` holds the change's values.
    """

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="audit_entries")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    at = models.DateTimeField(default=timezone.now)
    action = models.CharField(max_length=40)
    target = models.CharField(max_length=200, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["organisation", "-at"], name="audit_org_at")]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.target}"
