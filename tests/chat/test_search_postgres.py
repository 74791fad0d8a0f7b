"""On PostgreSQL (``make test`` runs these with DATABASE_URL): the conversation search's GIN index exists (its
migration ran) and the search finds, isolates and forgets as on SQLite."""

from __future__ import annotations

import pytest
from django.db import connection

from assistant.chat.search import INDEX_NAME, PG_VECTOR
from tests.chat import test_turns

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    assert connection.vendor == "postgresql", "these tests need DATABASE_URL=postgres://…"


def test_the_migration_made_the_stored_vector_and_its_gin_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [INDEX_NAME])
        row = cursor.fetchone()
        cursor.execute(
            "SELECT is_generated FROM information_schema.columns WHERE table_name = %s AND column_name = %s",
            [PG_VECTOR.table, PG_VECTOR.column],
        )
        generated = cursor.fetchone()
    assert row is not None and "gin" in row[0].lower() and f"({PG_VECTOR.column})" in row[0]
    assert generated == ("ALWAYS",)


def test_search_on_postgresql(demo_data: None) -> None:
    test_turns.test_search_finds_titles_and_messages_of_the_owners_conversations_only(demo_data)


def test_odd_input_on_postgresql(demo_data: None) -> None:
    test_turns.test_search_with_odd_input_answers_without_error(demo_data)
