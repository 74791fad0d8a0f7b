"""Staff's view of the connectors: read, enable or disable. Registering and picking tools are done on the
admins' page, which checks the address, the header variables and that each tool is read-only."""

from __future__ import annotations

from django.contrib import admin

from .models import Connector


@admin.register(Connector)
class ConnectorAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["name", "organisation", "url", "enabled"]
    list_filter = ["organisation", "enabled"]
    readonly_fields = ["organisation", "name", "description", "url", "headers", "tools", "created", "updated"]

    def has_add_permission(self, request: object) -> bool:
        return False
