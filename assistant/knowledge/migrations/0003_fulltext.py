"""Full-text search: an FTS5 table with its triggers on SQLite, a GIN index on PostgreSQL."""

from django.db import migrations

from assistant.knowledge import fulltext


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        fulltext.ensure_sqlite(schema_editor.connection)
    elif vendor == "postgresql":
        schema_editor.add_index(apps.get_model("knowledge", "Document"), fulltext.pg_index())


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        fulltext.drop_sqlite(schema_editor.connection)
    elif vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("knowledge", "Document"), fulltext.pg_index())


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0002_document_file")]

    operations = [migrations.RunPython(forwards, backwards)]
