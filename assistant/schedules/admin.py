from django.contrib import admin

from .models import Execution, ScheduledTask


@admin.register(ScheduledTask)
class ScheduledTaskAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["name", "organisation", "owner", "schedule", "cost_cap_eur", "enabled"]
    list_filter = ["organisation", "enabled"]


@admin.register(Execution)
class ExecutionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["task", "started", "run", "refused"]
