from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


class KnowledgeConfig(AppConfig):
    name = "assistant.knowledge"
    verbose_name = "Knowledge bases"

    def ready(self) -> None:
        post_migrate.connect(_ensure_fulltext, sender=self)


def _ensure_fulltext(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    # A later migration that rebuilds knowledge_document on SQLite drops the FTS triggers: put them back.
    from django.db.migrations.recorder import MigrationRecorder

    from . import fulltext

    conn = connections[using]
    if conn.vendor != "sqlite":
        return
    if ("knowledge", "0003_fulltext") in MigrationRecorder(conn).applied_migrations():
        fulltext.ensure_sqlite(conn)
