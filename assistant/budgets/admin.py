"""Staff see and edit categories, their months, raises and alerts here; admins use the budgets page."""

from __future__ import annotations

from django.contrib import admin

from .models import BudgetAlert, BudgetRaise, Category, CategoryMonth, Reservation


@admin.register(Category)
class CategoryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["name", "slug", "organisation", "monthly_tokens", "is_default", "alert_thresholds"]
    list_filter = ["organisation"]


@admin.register(CategoryMonth)
class CategoryMonthAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["category", "month", "used", "reserved", "cost_eur", "calls"]
    list_filter = ["category__organisation", "month"]


@admin.register(BudgetRaise)
class BudgetRaiseAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["category", "tokens", "ends_on", "created_by_name", "created", "reason"]
    list_filter = ["category__organisation"]
    readonly_fields = ["created_by", "created_by_name", "created"]


@admin.register(BudgetAlert)
class BudgetAlertAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["category", "month", "threshold", "used", "budget", "created", "emailed_to", "seen"]
    list_filter = ["category__organisation", "month"]


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["month", "tokens", "created"]
