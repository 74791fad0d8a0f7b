"""Lease moved to ``runs`` (``runs.0001_initial``): state only, its table ``workers_lease`` and rows stay."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("workers", "0001_initial"),
        ("runs", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Lease")],
            database_operations=[],
        ),
    ]
