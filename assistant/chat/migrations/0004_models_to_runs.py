"""Conversation, Message, Run and Step moved to ``runs`` (``runs.0001_initial``): state only, their tables
and rows stay. After every model pointing at them points at ``runs`` instead (``workers.0002``,
``schedules.0002``)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("chat", "0003_conversation_deleted"),
        ("runs", "0001_initial"),
        ("workers", "0002_lease_to_runs"),
        ("schedules", "0002_execution_run_in_runs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Step"),
                migrations.DeleteModel(name="Message"),
                migrations.DeleteModel(name="Run"),
                migrations.DeleteModel(name="Conversation"),
            ],
            database_operations=[],
        ),
    ]
