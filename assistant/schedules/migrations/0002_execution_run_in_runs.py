"""An execution's run is now ``runs.Run`` (the same table, ``chat_run``): state only, the column and its
foreign key stay as they are."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("schedules", "0001_initial"),
        ("runs", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="execution",
                    name="run",
                    field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="execution", to="runs.run"),
                ),
            ],
            database_operations=[],
        ),
    ]
