from typing import Any

from django.db import migrations, models

RESPONSES_MODELS = ("gpt-5", "o3", "o4-mini")  # OpenAI's reasoning models: their names on OpenAI begin so


def _responses_for_reasoning_models(apps: Any, schema_editor: Any) -> None:
    """OpenAI's reasoning models already in the catalogue go through the Responses API (their reasoning is sent back
    between tool calls); an admin can switch one back to Chat Completions."""
    entries = apps.get_model("catalogue", "CatalogueEntry").objects.filter(provider="openai")
    for entry in entries:
        if entry.api_model.startswith(RESPONSES_MODELS):
            entry.api = "responses"
            entry.save(update_fields=["api"])


class Migration(migrations.Migration):
    dependencies = [
        ("catalogue", "0004_entry_created"),
    ]

    operations = [
        migrations.AddField(
            model_name="catalogueentry",
            name="api",
            field=models.CharField(
                "API",
                choices=[
                    ("chat_completions", "Chat Completions"),
                    ("responses", "Responses API (OpenAI; keeps the model's reasoning between its tool calls)"),
                ],
                default="chat_completions",
                help_text="OpenAI only: the Responses API for its reasoning models (their reasoning is sent back "
                "between tool calls); Chat Completions for the others, and for a compatible server that lacks the "
                "Responses API.",
                max_length=20,
            ),
        ),
        migrations.RunPython(_responses_for_reasoning_models, migrations.RunPython.noop),
    ]
