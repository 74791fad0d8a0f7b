"""The catalogue's migration to the Responses API: OpenAI's reasoning models already in a catalogue switch to it."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from assistant.catalogue.models import CatalogueEntry

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("catalogue", "0004_entry_created")]


def test_openai_reasoning_models_already_in_the_catalogue_move_to_the_responses_api() -> None:
    MigrationExecutor(connection).migrate(BEFORE)
    old = MigrationExecutor(connection).loader.project_state(BEFORE).apps
    entry = old.get_model("catalogue", "CatalogueEntry")
    rows = {
        "gpt-5": ("openai", "gpt-5"),
        "o3": ("openai", "o3"),
        "o4-mini": ("openai", "o4-mini-2025-04-16"),
        "gpt-4.1": ("openai", "gpt-4.1"),
        "llama": ("openai", "llama3.1:8b"),
        "magistral-small": ("mistral", "magistral-small-latest"),
    }
    for model_id, (provider, api_model) in rows.items():
        entry.objects.create(
            model_id=model_id, provider=provider, api_model=api_model, display_name=model_id, input_price=1,
            cached_input_price=1, output_price=1, price_date=datetime.date(2025, 12, 1), price_source="test",
            context_window=100_000, output_cap=10_000,
        )  # fmt: skip

    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    MigrationExecutor(connection).migrate(latest)

    apis = dict(CatalogueEntry.objects.values_list("model_id", "api"))
    assert apis == {
        "gpt-5": "responses",
        "o3": "responses",
        "o4-mini": "responses",
        "gpt-4.1": "chat_completions",
        "llama": "chat_completions",
        "magistral-small": "chat_completions",
    }
