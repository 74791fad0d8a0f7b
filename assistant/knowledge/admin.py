"""Staff's view of the bases and documents: deleting here removes the stored files too, as the app does."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import Document, KnowledgeBase
from .uploads import delete_base, delete_document


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["name", "slug", "organisation"]

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        delete_base(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for kb in queryset:
            delete_base(kb)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: Django's class is not subscriptable at runtime
    list_display = ["title", "knowledge_base", "status", "failure"]
    list_filter = ["knowledge_base", "status"]

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        delete_document(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for doc in queryset:
            delete_document(doc)
