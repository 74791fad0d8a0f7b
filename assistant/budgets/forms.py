"""The budgets page's forms: a category, a temporary raise, the organisation's time zone, the forced-landing
threshold."""

from __future__ import annotations

import re
import zoneinfo
from datetime import date
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from assistant.orgs.models import Organisation
from assistant.orgs.translated import ReaderWords

from .models import MAX_BUDGET_TOKENS, Category


class ThresholdsField(forms.CharField):
    """Percentages typed as ``80, 100``, stored as ``[80, 100]``."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(t) for t in value)
        return value

    def to_python(self, value: Any) -> list[int]:  # type: ignore[override]  # returns the list of thresholds, where the base Field's stubs say str
        text = str(super().to_python(value))
        try:
            thresholds = sorted({int(part) for part in text.replace(";", ",").split(",") if part.strip()})
        except ValueError:
            thresholds = []
        if not thresholds or not all(1 <= t <= 100 for t in thresholds):
            raise forms.ValidationError(_("Percentages from 1 to 100, separated by commas (for instance 80, 100)."))
        return thresholds


# What people put between thousands: spaces (also no-break and thin ones), commas, dots, apostrophes, underscores.
GROUPED = re.compile(r"^\d{1,3}([ \u00a0\u202f\u2009,.'’_]\d{3})+$")


class TokensField(forms.IntegerField):
    """A number of tokens as people type it: any positive whole number, grouped by thousands or not."""

    widget = forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "off"})
    default_error_messages = {
        "invalid": _("Enter a whole number of tokens, for instance 500000 or 500 000."),
        "min_value": _("At least 1 token."),
        "max_value": _("At most %(limit_value)s tokens."),
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs["min_value"], kwargs["max_value"] = 1, MAX_BUDGET_TOKENS
        super().__init__(**kwargs)

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        return {}  # a text input: no min, max or step for the browser to refuse a number with

    def to_python(self, value: Any) -> int | None:
        text = str(value if value is not None else "").strip()
        if GROUPED.match(text):
            text = re.sub(r"\D", "", text)
        return super().to_python(text)


class CategoryForm(ReaderWords, forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """A category of one organisation; its slug is fixed once created (runs keep it)."""

    alert_thresholds = ThresholdsField(label=_("Alerts at (%)"), initial="80, 100")

    class Meta:
        model = Category
        fields = ["name", "slug", "monthly_tokens", "alert_thresholds"]
        labels = {"name": _("Name"), "slug": _("Short name"), "monthly_tokens": _("Monthly tokens")}
        field_classes = {"monthly_tokens": TokensField}

    def __init__(self, *args: Any, organisation: Organisation, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.organisation = organisation
        self.instance.organisation = organisation
        self.fields["slug"].help_text = _("What the composer, the API and scheduled tasks name it by.")
        if self.instance.pk:
            self.fields["slug"].disabled = True

    def clean_name(self) -> str:
        name = " ".join(str(self.cleaned_data["name"]).split())
        taken = Category.objects.filter(organisation=self.organisation, name__iexact=name).exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(_("Another category already has this name."))
        return name

    def clean_slug(self) -> str:
        slug = str(self.cleaned_data["slug"])
        taken = Category.objects.filter(organisation=self.organisation, slug=slug).exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(_("Another category already has this short name."))
        return slug


class RaiseForm(forms.Form):
    """Tokens added to one category until an end date: never taken from another category."""

    category = forms.ModelChoiceField(queryset=Category.objects.none(), label=_("Category"))
    tokens = TokensField(label=_("Tokens to add"))
    ends_on = forms.DateField(label=_("Until (included)"), widget=forms.DateInput(attrs={"type": "date"}))
    reason = forms.CharField(label=_("Reason"), max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args: Any, organisation: Organisation, today: date, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.today = today
        self.fields["category"].queryset = Category.objects.filter(organisation=organisation)  # type: ignore[attr-defined]  # a ModelChoiceField's queryset: Field's stubs do not have the attribute
        self.fields["category"].label_from_instance = lambda c: c.shown_name  # type: ignore[attr-defined]  # a ModelChoiceField's: each category in the reader's language

    def clean_reason(self) -> str:
        reason = str(self.cleaned_data["reason"]).strip()
        if not reason:
            raise forms.ValidationError(_("Say why the budget is raised."))
        return reason

    def clean_ends_on(self) -> date:
        ends_on: date = self.cleaned_data["ends_on"]
        if ends_on < self.today:
            raise forms.ValidationError(_("The end date is already past."))
        return ends_on


class TimeZoneForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    class Meta:
        model = Organisation
        fields = ["time_zone"]
        labels = {"time_zone": _("Time zone")}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].widget = forms.Select(choices=zone_choices(self.instance.time_zone))


# The regions of the IANA zones a person picks a city from, in the reader's words.
REGIONS = {
    "Africa": _("Africa"),
    "America": _("America"),
    "Antarctica": _("Antarctica"),
    "Arctic": _("Arctic"),
    "Asia": _("Asia"),
    "Atlantic": _("Atlantic"),
    "Australia": _("Australia"),
    "Europe": _("Europe"),
    "Indian": _("Indian Ocean"),
    "Pacific": _("Pacific"),
}


def zone_choices(current: str = "") -> list[tuple[str, Any]]:
    """UTC, then each region's cities (``Europe/Paris`` as "Paris" under Europe), sorted; the old aliases
    (``US/Eastern``, ``Etc/GMT+5``) only if one is the current zone, so that it stays shown."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for zone in sorted(zoneinfo.available_timezones()):
        region, _slash, city = zone.partition("/")
        if region in REGIONS and city:
            groups.setdefault(region, []).append((zone, city.replace("_", " ").replace("/", " / ")))
    choices: list[tuple[str, Any]] = [("UTC", "UTC")]
    if current and current != "UTC" and current.partition("/")[0] not in REGIONS:
        choices.append((current, current))
    choices += [(str(REGIONS[region]), cities) for region, cities in sorted(groups.items())]
    return choices


class LandingWatchForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """The share of a model's agents ending by forced landing or budget that raises an alert."""

    class Meta:
        model = Organisation
        fields = ["forced_landing_alert_percent"]
        labels = {"forced_landing_alert_percent": _("Alert at (%)")}
        help_texts = {"forced_landing_alert_percent": ""}  # the section's text says it
        widgets = {"forced_landing_alert_percent": forms.NumberInput(attrs={"min": 1, "max": 100})}
        error_messages = {
            "forced_landing_alert_percent": {
                "min_value": _("A percentage from 1 to 100."),
                "max_value": _("A percentage from 1 to 100."),
                "invalid": _("A percentage from 1 to 100."),
                "required": _("A percentage from 1 to 100."),
            }
        }
