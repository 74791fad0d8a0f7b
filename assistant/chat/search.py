"""Searching one's conversations, full text over their titles and messages, as the knowledge search does it
(``knowledge.fulltext``): an FTS5 table over ``chat_conversationtext`` on SQLite (external content, kept in sync by
triggers, accents folded, ranked by ``bm25()`` with the title above the text), a weighted ``tsvector`` stored in a
generated column with a GIN index on PostgreSQL (``PG_VECTOR``; ``simple`` configuration, ``ts_rank``,
``ts_headline``). Every query word matches as a prefix.

``ConversationText`` is kept in step by ``index`` (a message saved, a conversation renamed: the receivers below)
and loses a deleted conversation's row (``unindex``, from ``deletion.erase``). Results are the owner's only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from assistant.knowledge.fulltext import CONFIG, Fts5Table, PgVector, gin_index, headline_options, query_terms, tsquery
from assistant.runs.models import Conversation, Message

from .models import ConversationText

FTS_TABLE = "chat_conversationtext_fts"
INDEX_NAME = "chat_conversationtext_fts"
LIMIT = 20
OPEN, CLOSE = "\x02", "\x03"  # highlight marks, turned into <mark> once the snippet is escaped

FTS = Fts5Table(FTS_TABLE, content="chat_conversationtext", rowid="conversation_id", title="title", text="body")


def ensure_sqlite(conn: BaseDatabaseWrapper) -> None:
    FTS.create(conn)


def drop_sqlite(conn: BaseDatabaseWrapper) -> None:
    FTS.drop(conn)


PG_VECTOR = PgVector("chat_conversationtext", title="title", text="body", index=INDEX_NAME)


def pg_index() -> Any:
    """Migration 0005's expression index (0006 replaces it by ``PG_VECTOR``)."""
    return gin_index("title", "body", INDEX_NAME)


def index(conversation_id: int) -> None:
    """Rewrite a conversation's searchable text from its title and messages (a deleted one has none).

    A conversation of an inactive user is left as it is: no one can sign in to search it (the API's conversations
    belong to the organisation's service user, never active: ``orgs.keys.api_user``). Its next message after the
    user is active again rewrites the whole text."""
    conversation = Conversation.objects.filter(pk=conversation_id, deleted__isnull=True).select_related("user").first()
    if conversation is None:
        unindex(conversation_id)
        return
    if not conversation.user.is_active:
        return
    body = "\n\n".join(Message.objects.filter(conversation_id=conversation_id).values_list("content", flat=True))
    ConversationText.objects.update_or_create(
        conversation_id=conversation_id, defaults={"title": conversation.title, "body": body}
    )


def unindex(conversation_id: int) -> None:
    ConversationText.objects.filter(conversation_id=conversation_id).delete()


@dataclass(frozen=True)
class Result:
    conversation_id: int
    title: str
    snippet: SafeString


def _snippet(raw: str) -> SafeString:
    return mark_safe(escape(raw or "").replace(OPEN, "<mark>").replace(CLOSE, "</mark>"))


def search(organisation_id: int, user_id: int, query: str, limit: int = LIMIT) -> list[Result]:
    """The user's own conversations (in this organisation, not deleted) matching ``query``, best first."""
    if connection.vendor == "postgresql":
        return _search_postgresql(organisation_id, user_id, query, limit)
    if connection.vendor == "sqlite":
        return _search_sqlite(organisation_id, user_id, query, limit)
    raise NotImplementedError(f"No full-text search for the {connection.vendor} database.")


def _search_sqlite(organisation_id: int, user_id: int, query: str, limit: int) -> list[Result]:
    terms = query_terms(query, fold=True)
    if not terms:
        return []
    match = " OR ".join(f'"{t}"*' if len(t) > 2 else f'"{t}"' for t in terms)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT c.id, c.title, snippet({FTS_TABLE}, 1, %s, %s, '…', 16), bm25({FTS_TABLE}, 5.0, 1.0) AS rank
            FROM {FTS_TABLE} JOIN chat_conversation c ON c.id = {FTS_TABLE}.rowid
            WHERE {FTS_TABLE} MATCH %s AND c.organisation_id = %s AND c.user_id = %s AND c.deleted IS NULL
            ORDER BY rank, c.id DESC LIMIT %s""",
            [OPEN, CLOSE, match, organisation_id, user_id, limit],
        )
        rows = cursor.fetchall()
    return [Result(pk, title, _snippet(snippet)) for pk, title, snippet, _rank in rows]


def _search_postgresql(organisation_id: int, user_id: int, query: str, limit: int) -> list[Result]:
    terms = query_terms(query, fold=False)
    if not terms:
        return []
    options = headline_options(connection, StartSel=OPEN, StopSel=CLOSE, MaxWords=20, MinWords=8)
    v = PG_VECTOR.column
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT top.conversation_id, top.title, ts_headline(%s, t.body, to_tsquery(%s, %s), %s)
            FROM (
                SELECT t.conversation_id, c.title, ts_rank(t.{v}, q) AS rank
                FROM chat_conversationtext t JOIN chat_conversation c ON c.id = t.conversation_id,
                    to_tsquery(%s, %s) q
                WHERE t.{v} @@ q AND c.organisation_id = %s AND c.user_id = %s AND c.deleted IS NULL
                ORDER BY rank DESC, t.conversation_id DESC LIMIT %s
            ) top JOIN chat_conversationtext t ON t.conversation_id = top.conversation_id
            ORDER BY top.rank DESC, top.conversation_id DESC""",
            [CONFIG, CONFIG, tsquery(terms), options, CONFIG, tsquery(terms), organisation_id, user_id, limit],
        )
        rows = cursor.fetchall()
    return [Result(pk, title, _snippet(snippet)) for pk, title, snippet in rows]


def _owner_inactive(conversation: Conversation) -> bool:
    """Whether the conversation's owner, already loaded with it, is inactive (not loaded: ``index`` reads it)."""
    return Conversation.user.is_cached(conversation) and not conversation.user.is_active


@receiver(post_save, sender=Message, dispatch_uid="chat.search.message_saved")
def _message_saved(sender: type[Message], instance: Message, **kwargs: Any) -> None:
    if Message.conversation.is_cached(instance) and _owner_inactive(instance.conversation):
        return  # as ``index`` would, without reading the conversation again
    index(instance.conversation_id)


@receiver(post_save, sender=Conversation, dispatch_uid="chat.search.conversation_saved")
def _conversation_saved(sender: type[Conversation], instance: Conversation, **kwargs: Any) -> None:
    if kwargs.get("update_fields") == frozenset({"updated"}):
        return  # activity, not a new title: its messages index themselves
    if _owner_inactive(instance):
        return
    index(instance.pk)
