"""The scheduled task form: the composer's choices (models, levels, resources, categories) and a schedule."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from assistant.budgets import services as budgets
from assistant.catalogue import snapshot
from assistant.engine.errors import RequestRefused
from assistant.engine.policy import LEVELS
from assistant.knowledge.models import KnowledgeBase
from assistant.orgs.models import Organisation
from assistant.orgs.services import policy_for
from assistant.runs import intake, wording
from assistant.runs.intake import LEVEL_LABELS

from . import services
from .models import ScheduledTask


class ScheduledTaskForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    model = forms.ChoiceField(label=_("Model"))
    level = forms.ChoiceField(label=_("Reasoning level"), choices=[(lv, LEVEL_LABELS[lv]) for lv in LEVELS])
    resources = forms.MultipleChoiceField(label=_("Resources"), widget=forms.CheckboxSelectMultiple, required=False)
    category = forms.ChoiceField(label=_("Task category"), required=False)

    class Meta:
        model = ScheduledTask
        fields = ["name", "prompt", "model", "level", "resources", "category", "cost_cap_eur", "schedule", "enabled"]
        labels = {
            "name": _("Name"),
            "prompt": _("Prompt"),
            "cost_cap_eur": _("Cost cap per execution (EUR)"),
            "schedule": _("Schedule"),
            "enabled": _("Enabled"),
        }
        help_texts = {
            "cost_cap_eur": _(
                "An execution that reaches it stops as Stop does: the partial answer and the agents' findings are kept."
            ),
            "schedule": _(
                "Five fields, as in cron: minute hour day-of-month month day-of-week, in your organisation's time "
                "zone. For example 0 7 * * 1-5 runs at 7:00 on weekdays."
            ),
        }
        widgets = {"prompt": forms.Textarea(attrs={"rows": 4})}

    def _choice_field(self, name: str) -> forms.ChoiceField:
        # The form's copy of a field declared above as a ChoiceField (or MultipleChoiceField).
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)
        return field

    def __init__(self, *args: Any, organisation: Organisation, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.organisation = organisation
        catalogue = snapshot.catalogue()
        self._choice_field("model").choices = [
            (m, catalogue[m].display_name) for m in policy_for(organisation).allowed_ids(catalogue)
        ]
        kbs = KnowledgeBase.objects.filter(organisation=organisation)
        missing = services.unavailable_resources(organisation.pk, ("web", "code"))
        off = _("not configured on this server")
        self._choice_field("resources").choices = [
            *((f"kb:{kb.slug}", kb.shown_name) for kb in kbs),
            *((r, f"{label} ({off})" if r in missing else label) for r, label in services.RESOURCE_LABELS.items()),
            ("agents", _("Agents")),
        ]
        self._choice_field("category").choices = [("", _("The default category"))] + [
            (c.slug, c.shown_name) for c in budgets.categories_of(organisation)
        ]
        if not self.instance.pk:
            # A new task starts as the composer does (the unsaved instance's empty values would win).
            self.initial.update(
                level="approfondi", resources=[f"kb:{kb.slug}" for kb in kbs] + ["agents"], cost_cap_eur=Decimal("0.50")
            )

    def clean_schedule(self) -> str:
        value = " ".join(str(self.cleaned_data["schedule"]).split())
        try:
            services.parse_schedule(value)
        except ValueError as e:
            raise forms.ValidationError(_("This schedule cannot be read: %(reason)s") % {"reason": e}) from e
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        ask = intake.Ask(
            text=data["prompt"],
            model=data["model"],
            level=data["level"],
            resources=tuple(data["resources"]),
            category=data["category"],
        )
        # Checked as a chat request is; each execution is checked again (the policy may change).
        try:
            intake.check(self.organisation, ask)
        except RequestRefused as e:
            raise forms.ValidationError(wording.refusal_text(e.refusal)) from e
        return data
