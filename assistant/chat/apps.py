from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


class ChatConfig(AppConfig):
    name = "assistant.chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from . import (
            deletion,  # noqa: F401  (its receivers erase what a stopped run writes after a delete)
            search,  # noqa: F401  (its receivers keep the conversation search in step)
        )

        post_migrate.connect(_ensure_search, sender=self)


def _ensure_search(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    # A later migration that rebuilds chat_conversationtext on SQLite would drop the FTS triggers: put them back.
    from django.db.migrations.recorder import MigrationRecorder

    from . import search

    conn = connections[using]
    if conn.vendor == "sqlite" and ("chat", "0005_conversation_text") in MigrationRecorder(conn).applied_migrations():
        search.ensure_sqlite(conn)
