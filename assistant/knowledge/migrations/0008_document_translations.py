from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0007_translations"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="translations",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Its words in other languages, e.g. {'fr': {'name': 'Factures'}}; without, shown as written.",
            ),
        ),
    ]
