"""Staff edit organisations, members and each organisation's policy here; admins use the settings page."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from .models import AgentProfile, AuditEntry, Membership, Organisation, ReasoningLevel


class MembershipInline(admin.TabularInline):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    model = Membership
    extra = 0


class ReasoningLevelInline(admin.TabularInline):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    model = ReasoningLevel
    extra = 0
    max_num = 4


class AgentProfileInline(admin.StackedInline):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    model = AgentProfile
    extra = 0


class OrganisationAdminForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    class Meta:
        model = Organisation
        fields = "__all__"
        help_texts = {
            "allowed_models": 'Empty (null) for the whole catalogue, else a list of model ids: ["mistral-small"].'
        }


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    form = OrganisationAdminForm
    list_display = ["name", "slug", "allowed_models", "max_parallel_agents"]
    inlines = [MembershipInline, ReasoningLevelInline, AgentProfileInline]


@admin.register(ReasoningLevel)
class ReasoningLevelAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["organisation", "level", "effort", "main_rounds", "agent_rounds"]
    list_filter = ["organisation", "level"]


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["name", "organisation", "default_model", "tools"]
    list_filter = ["organisation"]
    search_fields = ["name", "instructions"]


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    """Read only: an audit log that can be edited would prove nothing."""

    list_display = ["at", "organisation", "actor_name", "action", "target"]
    list_filter = ["organisation", "action"]
    search_fields = ["actor_name", "target"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
