import django.db.models.functions.text
from django.db import migrations, models


def rename_duplicates(apps, schema_editor):
    """Names that differ only in case get a number, so that the constraint can hold (oldest first keeps it)."""
    Category = apps.get_model("budgets", "Category")
    seen: set[tuple[int, str]] = set()
    for category in Category.objects.order_by("organisation_id", "pk"):
        name, n = category.name, 1
        while (category.organisation_id, name.lower()) in seen:
            n += 1
            name = f"{category.name} ({n})"[:100]
        seen.add((category.organisation_id, name.lower()))
        if name != category.name:
            category.name = name
            category.save(update_fields=["name"])


class Migration(migrations.Migration):
    dependencies = [
        ("budgets", "0002_reservations"),
        ("orgs", "0004_api_keys"),
    ]

    operations = [
        migrations.RunPython(rename_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="category",
            constraint=models.UniqueConstraint(
                django.db.models.functions.text.Lower("name"),
                models.F("organisation"),
                name="category_name_per_org",
                violation_error_message="Another category already has this name.",
            ),
        ),
    ]
