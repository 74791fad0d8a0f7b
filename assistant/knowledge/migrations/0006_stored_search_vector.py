"""PostgreSQL: the documents' search vector stored in a generated column with its GIN index (``fulltext.PG_VECTOR``),
instead of migration 0003's index on the expression, which left every ranked row to parse its text again.
Nothing changes on SQLite (FTS5)."""

from django.db import migrations

from assistant.knowledge import fulltext


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("knowledge", "Document"), fulltext.pg_index())
        fulltext.PG_VECTOR.create(schema_editor.connection)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        fulltext.PG_VECTOR.drop(schema_editor.connection)
        schema_editor.add_index(apps.get_model("knowledge", "Document"), fulltext.pg_index())


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0005_tables")]

    operations = [migrations.RunPython(forwards, backwards)]
