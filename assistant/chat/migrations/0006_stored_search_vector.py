"""PostgreSQL: the conversations' search vector stored in a generated column with its GIN index
(``search.PG_VECTOR``), instead of migration 0005's index on the expression. Nothing changes on SQLite (FTS5)."""

from django.db import migrations

from assistant.chat import search


def forwards(apps, schema_editor):
    search.PG_VECTOR.replace(schema_editor, apps.get_model("chat", "ConversationText"), search.pg_index())


def backwards(apps, schema_editor):
    search.PG_VECTOR.restore(schema_editor, apps.get_model("chat", "ConversationText"), search.pg_index())


class Migration(migrations.Migration):
    dependencies = [("chat", "0005_conversation_text")]

    operations = [migrations.RunPython(forwards, backwards)]
