"""The catalogue in the database: loaded from the data file, offered only when its provider has a key."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from assistant.catalogue import snapshot
from assistant.catalogue.loading import DATA_FILE, infos_from_file
from assistant.catalogue.models import CatalogueEntry
from assistant.demo.model import DEMO_MODELS, DemoModel
from assistant.engine.models.mistral import MistralModel
from assistant.engine.models.openai import OpenAIModel
from assistant.engine.models.responses import ResponsesModel

pytestmark = pytest.mark.django_db

SHIPPED = {
    "mistral-small",
    "mistral-medium",
    "mistral-large",
    "magistral-small",
    "magistral-medium",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4o-mini",
    "gpt-5",
    "gpt-5-mini",
}
DEMO = {m.id for m in DEMO_MODELS}


@pytest.fixture
def keys(settings: SettingsWrapper) -> SettingsWrapper:
    """Mistral has a key, OpenAI has none (whatever the environment running the tests says)."""
    settings.MISTRAL_API_KEY = "mistral-test-key"
    settings.MISTRAL_BASE_URL = None
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = None
    snapshot.forget_catalogue()
    return settings


def test_the_catalogue_loads_from_the_data_file_with_dated_sourced_eur_prices() -> None:
    call_command("load_catalogue", verbosity=0)

    entries = {e.model_id: e for e in CatalogueEntry.objects.all()}
    assert set(entries) == SHIPPED | DEMO  # the demo models' entries carry the admin's choice to offer them
    data = json.loads(DATA_FILE.read_text())
    rate = Decimal(str(data["usd_to_eur"]["rate"]))
    for raw in data["models"]:
        entry = entries[raw["id"]]
        assert entry.input_price == (Decimal(str(raw["list_price_usd"]["input"])) * rate).quantize(Decimal("0.000001"))
        assert entry.output_price == (Decimal(str(raw["list_price_usd"]["output"])) * rate).quantize(
            Decimal("0.000001")
        )
        assert entry.price_date and entry.price_source.startswith("https://")
        assert "converted at 1 EUR = 1.16 USD" in entry.price_note
        info = entry.to_info()
        assert info.context_window > 0 and info.output_cap > 0
        assert {"active_params_min", "total_params_max", "pue", "wue"} <= set(info.carbon)
    assert entries["gpt-5"].to_info().reasoning_efforts == ("minimal", "low", "medium", "high")
    assert entries["gpt-4.1"].to_info().reasoning_efforts == ()
    assert entries["magistral-small"].reasoning == "native"
    # GPT-5 at 1.25 USD in, 0.125 cached, 10 out per million tokens.
    assert float(entries["gpt-5"].input_price) == pytest.approx(1.25 / 1.16, rel=1e-4)
    assert infos_from_file() == [e.to_info() for e in CatalogueEntry.objects.exclude(provider="demo")]


def test_loading_is_idempotent_and_keeps_what_an_admin_edited() -> None:
    call_command("load_catalogue", verbosity=0)
    CatalogueEntry.objects.filter(model_id="mistral-small").update(input_price=Decimal("0.5"))
    call_command("load_catalogue", verbosity=0)
    assert CatalogueEntry.objects.count() == len(SHIPPED | DEMO)
    assert CatalogueEntry.objects.get(model_id="mistral-small").input_price == Decimal("0.5")
    call_command("load_catalogue", "--refresh", verbosity=0)
    assert CatalogueEntry.objects.get(model_id="mistral-small").input_price != Decimal("0.5")


def test_a_provider_without_a_key_is_not_offered(keys: SettingsWrapper) -> None:
    call_command("load_catalogue", verbosity=0)
    offered = set(snapshot.catalogue())
    # A real provider is configured: the demo models stay out of real work.
    assert offered == {"mistral-small", "mistral-medium", "mistral-large", "magistral-small", "magistral-medium"}

    keys.OPENAI_API_KEY = "sk-test"
    assert set(snapshot.catalogue()) == SHIPPED  # the configuration is part of the snapshot


def test_a_disabled_entry_is_not_offered_and_an_edit_shows_at_once(keys: SettingsWrapper) -> None:
    call_command("load_catalogue", verbosity=0)
    assert "mistral-large" in snapshot.catalogue()
    entry = CatalogueEntry.objects.get(model_id="mistral-large")
    entry.enabled = False
    entry.save()
    assert "mistral-large" not in snapshot.catalogue()


def test_resolve_gives_each_model_its_provider_and_the_demo_stays_when_offered(keys: SettingsWrapper) -> None:
    keys.OPENAI_API_KEY = "sk-test"
    keys.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    call_command("load_catalogue", verbosity=0)
    CatalogueEntry.objects.filter(model_id="demo-large").update(offered_with_real_providers=True)
    snapshot.forget_catalogue()
    snapshot.catalogue()

    async def resolved() -> tuple[object, object, object, object, object]:
        # resolve() runs in the run's event loop: it must not query the database there.
        return (
            snapshot.resolve("mistral-small"),
            snapshot.resolve("magistral-medium"),
            snapshot.resolve("gpt-5-mini"),
            snapshot.resolve("gpt-4.1"),
            snapshot.resolve("demo-large"),
        )

    small, magistral, gpt, older, demo = async_to_sync(resolved)()
    assert isinstance(small, MistralModel) and small.api_model == "mistral-small-latest" and small.adjustable_reasoning
    assert isinstance(magistral, MistralModel) and not magistral.adjustable_reasoning
    # OpenAI's reasoning models go through the Responses API, whatever the server; the others through Chat Completions.
    assert isinstance(gpt, ResponsesModel) and gpt.api_model == "gpt-5-mini"
    assert gpt.provider.base_url == "http://127.0.0.1:9/v1" and not gpt.provider.is_openai
    assert isinstance(older, OpenAIModel) and older.api_model == "gpt-4.1"
    assert isinstance(demo, DemoModel)

    # An admin switches an entry back to Chat Completions (a compatible server that lacks the Responses API).
    entry = CatalogueEntry.objects.get(model_id="gpt-5-mini")
    entry.api = "chat_completions"
    entry.full_clean()
    entry.save()
    snapshot.forget_catalogue()
    snapshot.catalogue()
    assert isinstance(async_to_sync(_resolve)("gpt-5-mini"), OpenAIModel)


async def _resolve(model_id: str) -> object:
    return snapshot.resolve(model_id)


def test_the_shipped_reasoning_models_of_openai_use_the_responses_api_and_only_openai_has_it() -> None:
    from django.core.exceptions import ValidationError

    call_command("load_catalogue", verbosity=0)
    apis = dict(CatalogueEntry.objects.values_list("model_id", "api"))
    assert {m for m, api in apis.items() if api == "responses"} == {"gpt-5", "gpt-5-mini"}
    entry = CatalogueEntry.objects.get(model_id="mistral-large")
    entry.api = "responses"
    with pytest.raises(ValidationError, match="Only OpenAI"):
        entry.full_clean()


def test_the_model_picker_lists_only_usable_models(keys: SettingsWrapper, client: Client) -> None:
    call_command("load_catalogue", verbosity=0)
    call_command("load_demo", verbosity=0)
    assert client.login(username="demo", password="demo-password")
    page = client.get("/").content.decode()
    assert 'value="mistral-small"' in page and 'value="demo-large"' not in page
    assert 'value="gpt-5"' not in page


def test_the_admin_says_why_a_model_is_not_offered(keys: SettingsWrapper, client: Client) -> None:
    call_command("load_catalogue", verbosity=0)
    get_user_model().objects.create_superuser("root", "root@example.com", "root-password")
    assert client.login(username="root", password="root-password")
    page = client.get("/admin/catalogue/catalogueentry/").content.decode()
    assert "no: OPENAI_API_KEY is not set" in page
    assert page.count("no: OPENAI_API_KEY is not set") == 5  # the five OpenAI models
    entry = CatalogueEntry.objects.get(model_id="gpt-5")
    assert client.get(f"/admin/catalogue/catalogueentry/{entry.pk}/change/").status_code == 200


def test_an_entry_with_inconsistent_reasoning_is_refused() -> None:
    from django.core.exceptions import ValidationError

    call_command("load_catalogue", verbosity=0)
    entry = CatalogueEntry.objects.get(model_id="gpt-4.1")
    entry.reasoning_efforts = ["high"]
    with pytest.raises(ValidationError):
        entry.full_clean()
    entry.reasoning, entry.reasoning_efforts = "adjustable", ["extreme"]
    with pytest.raises(ValidationError):
        entry.full_clean()
