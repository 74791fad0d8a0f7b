"""The settings forms: allowed models, reasoning levels with the parallel-agent cap, agent profiles."""

from __future__ import annotations

import zoneinfo
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django import forms
from django.conf import settings
from django.utils import formats, timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from assistant.catalogue import snapshot
from assistant.catalogue.naming import model_label

from . import keys
from .dates import long_date
from .models import (
    DELEGATING_LEVELS,
    KIND_CHOICES,
    LIMIT_MODES,
    MAX_AGENT_ROUNDS,
    MAX_MAIN_ROUNDS,
    MAX_MONTHLY_EUR,
    MAX_PARALLEL_AGENTS,
    AgentProfile,
    Membership,
    Organisation,
    ReasoningLevel,
)


def _model_choices() -> list[tuple[str, str]]:
    """Each model with its prices and the date the catalogue recorded them (in the reader's language)."""
    catalogue = snapshot.catalogue()
    out = []
    for m in catalogue.values():
        prices = " / ".join(formats.number_format(Decimal(f"{price:g}")) for price in (m.input_price, m.output_price))
        label = f"{model_label(m.label)} — {prices} EUR"
        if m.price_date is not None:
            label += " " + gettext("(prices of %(date)s)") % {"date": long_date(m.price_date)}
        out.append((m.id, label))
    return out


class ModelRestrictionForm(forms.Form):
    """Every model of the catalogue (including models added later), or only the ones ticked: what an organisation, or
    one of its API keys, may use."""

    restrict = forms.TypedChoiceField(
        choices=[("", _("Every model of the catalogue, including models added later")), ("1", _("Only these models"))],
        coerce=bool,
        # Django takes any empty value; the stubs only a str or None.
        empty_value=False,  # type: ignore[arg-type]  # Django takes any empty value; the stubs only a str or None
        required=False,
        widget=forms.RadioSelect,
        initial="",
    )
    models = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["models"].choices = _model_choices()  # type: ignore[attr-defined]  # a ChoiceField's choices: Field's stubs do not have the attribute

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("restrict") and not data.get("models"):
            self.add_error("models", _("Tick at least one model, or allow the whole catalogue."))
        return data

    def allowed_models(self) -> list[str] | None:
        """The models ticked in catalogue order, or None for the whole catalogue."""
        if not self.cleaned_data["restrict"]:
            return None
        chosen = set(self.cleaned_data["models"])
        return [m for m in snapshot.catalogue() if m in chosen]


class AllowedModelsForm(ModelRestrictionForm):
    """The models the organisation's assistant may use."""

    def __init__(self, *args: Any, organisation: Organisation, **kwargs: Any) -> None:
        allowed = organisation.allowed_models
        kwargs.setdefault(
            "initial",
            {"restrict": "1" if allowed is not None else "", "models": allowed if allowed is not None else []},
        )
        super().__init__(*args, **kwargs)
        self.organisation = organisation

    def save(self) -> Organisation:
        org = self.organisation
        org.allowed_models = self.allowed_models()
        org.save(update_fields=["allowed_models"])
        return org


class LevelForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """One reasoning level; below Approfondi the agent budget is fixed at 0."""

    class Meta:
        model = ReasoningLevel
        fields = ["effort", "main_rounds", "agent_rounds"]
        widgets = {
            "main_rounds": forms.NumberInput(attrs={"min": 1, "max": MAX_MAIN_ROUNDS}),
            "agent_rounds": forms.NumberInput(attrs={"min": 0, "max": MAX_AGENT_ROUNDS}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["effort"].label = _("Provider effort")
        self.fields["main_rounds"].label = _("Round limit of the main model")
        self.fields["agent_rounds"].label = _("Agent round budget")
        self.fields["main_rounds"].widget.attrs["min"] = 1
        for field in self.fields.values():
            field.help_text = ""  # the section's text explains the columns
        if self.instance.level not in DELEGATING_LEVELS:
            # A disabled field keeps its initial value (0) whatever is posted.
            self.fields["agent_rounds"].disabled = True


class ParallelForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """The agents running at once, and the cost over which a delegation is asked of the user before it launches."""

    class Meta:
        model = Organisation
        fields = ["max_parallel_agents", "delegation_confirm_eur"]
        widgets = {
            "max_parallel_agents": forms.NumberInput(attrs={"min": 1, "max": MAX_PARALLEL_AGENTS}),
            "delegation_confirm_eur": forms.NumberInput(attrs={"min": "0.0001", "step": "any", "inputmode": "decimal"}),
        }
        labels = {
            "max_parallel_agents": _("Agents running at once"),
            "delegation_confirm_eur": _("Ask before a delegation that can cost more than (EUR)"),
        }
        help_texts = {"max_parallel_agents": "", "delegation_confirm_eur": ""}


class AgentProfileForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """An agent profile of one organisation; the name is unique within it."""

    tools = forms.MultipleChoiceField(
        choices=KIND_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        label=_("Resources it may receive"),
        error_messages={"required": _("Tick at least one kind of resource.")},
    )
    default_model = forms.ChoiceField(
        required=False,
        label=_("Default model"),
        help_text=_(
            "Used when a delegation names this profile but no model; it must be allowed and at least twice cheaper than the main model."
        ),
    )

    class Meta:
        model = AgentProfile
        fields = ["name", "instructions", "default_model", "tools"]
        labels = {"name": _("Name"), "instructions": _("Instructions")}
        help_texts = {
            "name": _("The name the main model gives when it delegates to this profile."),
            "instructions": _("Added to the agent's system prompt."),
        }
        widgets = {"instructions": forms.Textarea(attrs={"rows": 6})}

    def __init__(self, *args: Any, organisation: Organisation, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.organisation = organisation
        self.instance.organisation = organisation
        choices = [("", _("None: the delegation names the model")), *_model_choices()]
        current = self.instance.default_model
        if current and current not in dict(choices):
            # A model that left the catalogue stays visible, so that saving tells the admin about it.
            choices.append((current, current))
        self.fields["default_model"].choices = choices  # type: ignore[attr-defined]  # a ChoiceField's choices: Field's stubs do not have the attribute

    def clean_tools(self) -> list[str]:
        chosen = set(self.cleaned_data["tools"])
        return [kind for kind, _label in KIND_CHOICES if kind in chosen]

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"]).strip()
        taken = AgentProfile.objects.filter(organisation=self.organisation, name__iexact=name)
        if taken.exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError(_("A profile with this name already exists."))
        return name


class ApiKeyForm(ModelRestrictionForm):
    """A new API key: a name, the whole catalogue or only the models ticked, and its optional limits."""

    name = forms.CharField(
        max_length=100, label=_("Name"), help_text=_("What the key is for, e.g. the tool that uses it.")
    )
    expires_on = forms.DateField(
        required=False,
        label=_("Expires after"),
        help_text=_("Optional: the last day the key works (the end of that day in the organisation's time zone)."),
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    rate_limit = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100_000,
        label=_("Requests per minute"),
    )
    monthly_eur = forms.DecimalField(
        required=False,
        min_value=Decimal("0.01"),
        max_value=MAX_MONTHLY_EUR,
        decimal_places=2,
        label=_("Spend limit per month (EUR)"),
        help_text=_(
            "Optional: what the key's requests may cost per calendar month, in the organisation's time zone; "
            "empty for no limit."
        ),
    )
    limit_mode = forms.ChoiceField(
        choices=LIMIT_MODES,
        initial="hard",
        required=False,  # a key with no limit needs no mode; a limit given with none is a hard cap
        label=_("When the limit is reached"),
        help_text=_("A hard cap refuses the key's requests until the month ends; an alert only e-mails the admins."),
    )

    def __init__(self, *args: Any, organisation: Organisation | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zone = zoneinfo.ZoneInfo(organisation.time_zone if organisation else "UTC")
        self.fields["rate_limit"].help_text = _("Optional: empty for the server's default (%(n)s).") % {
            "n": settings.API_KEY_RATE_LIMIT
        }

    def clean_expires_on(self) -> date | None:
        day: date | None = self.cleaned_data.get("expires_on")
        if day is not None and day < timezone.now().astimezone(self.zone).date():
            raise forms.ValidationError(_("Choose today or a later day."))
        return day

    def expires(self) -> datetime | None:
        """The moment the key stops working: midnight after the chosen day, in the organisation's time zone."""
        day: date | None = self.cleaned_data.get("expires_on")
        return keys.end_of(day, str(self.zone)) if day is not None else None


class MemberDefaultForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """The organisation's spend limit for every member who has none of their own."""

    class Meta:
        model = Organisation
        fields = ["member_monthly_eur", "member_limit_mode"]
        labels = {
            "member_monthly_eur": _("Each member's spend limit per month (EUR)"),
            "member_limit_mode": _("When the limit is reached"),
        }
        help_texts = {
            "member_monthly_eur": _(
                "What a member's chat requests and scheduled tasks may cost per calendar month, in the organisation's "
                "time zone; empty for no limit."
            ),
            "member_limit_mode": _(
                "A hard cap refuses their requests (and stops a running one) until the month ends; an alert only "
                "e-mails the admins and the member, and shows a banner, at 80 % and 100 %."
            ),
        }


class MemberLimitForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """One member's own spend limit, over the organisation's default."""

    class Meta:
        model = Membership
        fields = ["limit_mode", "monthly_eur"]
        labels = {"limit_mode": _("Limit"), "monthly_eur": _("EUR per month")}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("limit_mode") in ("hard", "alert"):
            if data.get("monthly_eur") is None and "monthly_eur" not in self.errors:
                self.add_error("monthly_eur", _("Give the amount of the member's own limit."))
        else:
            data["monthly_eur"] = None  # the default, or no limit: no amount of their own
        return data
