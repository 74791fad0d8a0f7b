"""What the conversation search reads: one row per conversation, its title and its messages' text (``search``)."""

from __future__ import annotations

from django.db import models

from assistant.runs.models import Conversation


class ConversationText(models.Model):
    """A conversation's searchable text, kept in step with it by ``search.index`` (message saved, renamed) and
    removed when it is deleted; indexed by FTS5 on SQLite, by a GIN index on PostgreSQL."""

    conversation = models.OneToOneField(
        Conversation, primary_key=True, on_delete=models.CASCADE, related_name="search_text"
    )
    title = models.CharField(max_length=200)
    body = models.TextField()

    class Meta:
        db_table = "chat_conversationtext"
