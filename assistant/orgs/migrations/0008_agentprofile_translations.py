from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("orgs", "0007_organisation_forced_landing_alert_percent"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentprofile",
            name="translations",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Its words in other languages, e.g. {'fr': {'name': 'Factures'}}; without, shown as written.",
            ),
        ),
    ]
