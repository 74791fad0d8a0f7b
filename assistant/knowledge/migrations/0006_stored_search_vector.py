"""PostgreSQL: the documents' search vector stored in a generated column with its GIN index (``fulltext.PG_VECTOR``),
instead of migration 0003's index on the expression, which left every ranked row to parse its text again.
Nothing changes on SQLite (FTS5)."""

from django.db import migrations

from assistant.knowledge import fulltext


def forwards(apps, schema_editor):
    fulltext.PG_VECTOR.replace(schema_editor, apps.get_model("knowledge", "Document"), fulltext.pg_index())


def backwards(apps, schema_editor):
    fulltext.PG_VECTOR.restore(schema_editor, apps.get_model("knowledge", "Document"), fulltext.pg_index())


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0005_tables")]

    operations = [migrations.RunPython(forwards, backwards)]
