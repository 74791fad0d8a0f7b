from django.contrib import admin

from .models import Conversation, Run, Step


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["title", "user", "organisation", "updated", "deleted"]
    list_filter = ["deleted"]


class StepInline(admin.TabularInline):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    model = Step
    extra = 0
    readonly_fields = ["seq", "kind", "agent_id", "data"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["id", "conversation", "model", "level", "status", "cost_eur", "created"]
    list_filter = ["status", "model"]
    inlines = [StepInline]
