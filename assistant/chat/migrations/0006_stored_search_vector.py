"""PostgreSQL: the conversations' search vector stored in a generated column with its GIN index
(``search.PG_VECTOR``), instead of migration 0005's index on the expression. Nothing changes on SQLite (FTS5)."""

from django.db import migrations

from assistant.chat import search


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("chat", "ConversationText"), search.pg_index())
        search.PG_VECTOR.create(schema_editor.connection)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        search.PG_VECTOR.drop(schema_editor.connection)
        schema_editor.add_index(apps.get_model("chat", "ConversationText"), search.pg_index())


class Migration(migrations.Migration):
    dependencies = [("chat", "0005_conversation_text")]

    operations = [migrations.RunPython(forwards, backwards)]
