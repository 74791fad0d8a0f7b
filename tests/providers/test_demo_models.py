"""The offline demo models stay out of real work: with a real provider configured they are offered nowhere (model
picker, settings, the API's model list, the agents tool's models) unless an admin offers them in the catalogue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from assistant.catalogue import snapshot
from assistant.catalogue.models import CatalogueEntry
from assistant.demo.model import DEMO_MODELS
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.orgs.services import policy_for

pytestmark = pytest.mark.django_db
DEMO = {m.id for m in DEMO_MODELS}
MISTRAL = {"mistral-small", "mistral-medium", "mistral-large", "magistral-small", "magistral-medium"}


@pytest.fixture
def loaded(settings: SettingsWrapper) -> Iterator[SettingsWrapper]:
    """The catalogue and the demo data loaded, no provider key (whatever the environment says)."""
    settings.MISTRAL_API_KEY, settings.MISTRAL_BASE_URL = "", None
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "", None
    call_command("load_catalogue", verbosity=0)
    call_command("load_demo", verbosity=0)
    snapshot.forget_catalogue()
    yield settings
    snapshot.forget_catalogue()


def offered_everywhere() -> dict[str, set[str]]:
    """The models each place offers: the catalogue, the model picker, the settings, the API, the agents tool."""
    org = Organisation.objects.get(slug="demo")
    user = get_user_model().objects.get(username="demo")
    client = Client()
    client.force_login(user)
    picker = client.get("/").content.decode()
    settings_page = client.get("/settings/").content.decode()
    secret = keys.create_key(org, "test")[1]
    listed = Client().get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {secret}").json()["data"]
    catalogue = snapshot.catalogue()
    every = {*MISTRAL, *DEMO}
    return {
        "catalogue": set(catalogue),
        "picker": {m for m in every if f'value="{m}"' in picker},
        "settings": {m for m in every if f'value="{m}"' in settings_page},
        "api": {m["id"] for m in listed},
    }


def agent_models(main: str) -> set[str]:
    """The models the agents tool offers a run of the demo organisation on ``main``."""
    catalogue = snapshot.catalogue()
    return {
        m.id
        for m in catalogue.cheaper_than(main, policy_for(Organisation.objects.get(slug="demo")).allowed_ids(catalogue))
    }


def test_without_a_real_provider_the_demo_models_are_offered(loaded: SettingsWrapper) -> None:
    for place, models in offered_everywhere().items():
        assert models == DEMO, place
    assert agent_models("demo-large") == {"demo-small"}


def test_with_a_real_provider_they_are_offered_nowhere(loaded: SettingsWrapper) -> None:
    loaded.MISTRAL_API_KEY = "mistral-test-key"
    for place, models in offered_everywhere().items():
        assert models == MISTRAL, place
    assert agent_models("mistral-large") and not agent_models("mistral-large") & DEMO
    # Nor taken: the API does not know them.
    secret = keys.create_key(Organisation.objects.get(slug="demo"), "t")[1]
    response = Client().post(
        "/v1/chat/completions",
        {"model": "demo-small", "messages": [{"role": "user", "content": "Hi"}]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"


def test_an_admin_offers_one_next_to_the_real_ones(loaded: SettingsWrapper) -> None:
    loaded.MISTRAL_API_KEY = "mistral-test-key"
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-password")
    admin = Client()
    admin.force_login(root)
    listing = admin.get("/admin/catalogue/catalogueentry/").content.decode()
    assert "no: a real provider is configured" in listing
    entry = CatalogueEntry.objects.get(model_id="demo-small")
    entry.offered_with_real_providers = True
    entry.save()  # the admin's save drops the snapshot (signals), as this does
    for place, models in offered_everywhere().items():
        assert models == MISTRAL | {"demo-small"}, place
    assert "demo-small" in agent_models("mistral-large")
    # Disabled, it is offered nowhere, whatever the flag.
    entry.enabled = False
    entry.save()
    assert "demo-small" not in snapshot.catalogue()


def test_only_demo_models_take_the_flag(loaded: Any) -> None:
    from django.core.exceptions import ValidationError

    entry = CatalogueEntry.objects.get(model_id="mistral-small")
    entry.offered_with_real_providers = True
    with pytest.raises(ValidationError):
        entry.full_clean()
    demo = CatalogueEntry.objects.get(model_id="demo-large")
    demo.model_id, demo.pk = "demo-huge", None
    with pytest.raises(ValidationError):
        demo.full_clean()
