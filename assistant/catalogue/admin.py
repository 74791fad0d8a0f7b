from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin

from .models import CatalogueEntry

if TYPE_CHECKING:
    EntryAdmin = admin.ModelAdmin[CatalogueEntry]
else:  # ModelAdmin is generic for the type checker only
    EntryAdmin = admin.ModelAdmin


@admin.register(CatalogueEntry)
class CatalogueEntryAdmin(EntryAdmin):
    list_display = [
        "model_id",
        "display_name",
        "provider",
        "input_price",
        "cached_input_price",
        "output_price",
        "price_date",
        "context_window",
        "reasoning",
        "api",
        "enabled",
        "offered_with_real_providers",
        "available",
    ]
    list_filter = ["provider", "api", "enabled", "reasoning"]
    search_fields = ["model_id", "display_name", "api_model"]
    readonly_fields = ["available", "updated"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "model_id",
                    "display_name",
                    "provider",
                    "api_model",
                    "api",
                    "enabled",
                    "offered_with_real_providers",
                    "available",
                    "position",
                ]
            },
        ),
        (
            "Prices (EUR per million tokens)",
            {
                "fields": [
                    "input_price",
                    "cached_input_price",
                    "output_price",
                    "price_date",
                    "price_source",
                    "price_note",
                ]
            },
        ),
        (
            "Limits and capabilities",
            {"fields": ["context_window", "output_cap", "reasoning", "reasoning_efforts", "supports_tools"]},
        ),
        ("Carbon", {"fields": ["carbon"]}),
        (None, {"fields": ["updated"]}),
    ]

    @admin.display(description="available")
    def available(self, entry: CatalogueEntry) -> str:
        # Why a model is missing from the picker: the admin reads it here rather than guessing.
        reason = entry.unavailable_reason()
        return f"no: {reason}" if reason else "yes"
