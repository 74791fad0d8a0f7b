"""The offline demo models carry the carbon parameters of a real model of their size, the catalogue's own, so a
run offline shows a carbon figure; the footer, the agent panel and the usage page mark it as the demo's estimate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import translation

from assistant.budgets.report import Totals
from assistant.catalogue import snapshot
from assistant.catalogue.loading import DATA_FILE, infos_from_file
from assistant.chat.agent_views import carbon_amount
from assistant.chat.presenters import carbon_line
from assistant.demo.model import CARBON_AS, DEMO_MODELS
from assistant.engine.carbon import CARBON_KEYS, call_impact
from assistant.engine.types import UsagePart
from assistant.engine.usage import RunUsage, UsageData
from assistant.runs.wording import demo_carbon_hint

INFOS = {m.id: m for m in infos_from_file()}


@pytest.mark.parametrize("demo", DEMO_MODELS, ids=lambda m: m.id)
def test_a_demo_model_carries_the_carbon_parameters_of_the_real_model_it_names(demo: Any) -> None:
    real_id, real_name = CARBON_AS[demo.id]
    real = INFOS[real_id]
    assert real_name.startswith(real.display_name)  # "Mistral Small" is Mistral Small 4 (the entry's note)
    assert dict(demo.carbon) == dict(real.carbon)  # parameter counts, tps/ttft, and the provider's PUE/WUE
    assert all(k in demo.carbon for k in CARBON_KEYS)
    ours, theirs = call_impact(demo, 300, 2.0, "FRA"), call_impact(real, 300, 2.0, "FRA")
    assert ours is not None and theirs is not None and ours.carbon_g == theirs.carbon_g > 0


def test_demo_large_is_counted_as_a_larger_model_than_demo_small() -> None:
    large, small = (call_impact(m, 300, 2.0, "WOR") for m in DEMO_MODELS)
    assert large is not None and small is not None and large.carbon_g > small.carbon_g


@pytest.mark.django_db
def test_the_demo_catalogue_entries_carry_them_with_their_source() -> None:
    call_command("load_catalogue", verbosity=0)
    entries = snapshot.catalogue()
    for demo in DEMO_MODELS:
        assert dict(entries[demo.id].carbon) == dict(demo.carbon)
    from assistant.catalogue.models import CatalogueEntry

    source = CatalogueEntry.objects.get(model_id="demo-large").carbon["source"]
    assert "offline demo's estimate" in source and "Mistral Large 3" in source
    assert json.loads(DATA_FILE.read_text())  # the file the parameters are checked against above


def _usage(*models: str) -> dict[str, Any]:
    usage = RunUsage()
    for model in models:
        info = next(m for m in (*DEMO_MODELS, *INFOS.values()) if m.id == model)
        usage.add(model, UsagePart(1_000, 200), 0.001, call_impact(info, 200, 1.0, "FRA"))
    return usage.as_dict()


def test_the_footer_panel_and_usage_page_mark_the_demo_s_estimate_in_both_languages() -> None:
    demo, real = _usage("demo-large", "demo-small"), _usage("mistral-large")
    footer = carbon_line(demo)
    assert footer.startswith("Carbon: ") and "g CO₂e (the offline demo’s estimate" in footer
    assert "Mistral Large 3, Mistral Small 4" in footer
    assert "demo" not in carbon_line(real)  # a real model's figure is not marked
    panel = carbon_amount(UsageData.model_validate(_usage("demo-small")))
    assert panel.endswith("(the offline demo’s estimate, with the parameters of Mistral Small 4)")
    totals = Totals()
    totals.add_usage(demo)
    assert totals.carbon_text.endswith(" g CO₂e (the demo’s estimate)")  # in a table; the page explains it once
    hint = demo_carbon_hint(["mistral-large", "demo-small", "demo-large"])
    assert hint.endswith("(Mistral Large 3 for demo-large, Mistral Small 4 for demo-small).")
    assert demo_carbon_hint(["mistral-large"]) == ""
    with translation.override("fr"):
        assert carbon_line(demo).startswith("Carbone : ")
        assert "(estimation de la démo hors ligne, avec les paramètres de Mistral Large 3" in carbon_line(demo)
        assert totals.carbon_text.endswith(" g CO₂e (estimation de la démo)")
        assert "Mistral Small 4 pour demo-small" in demo_carbon_hint(["demo-small"])
        assert "estimation de la démo hors ligne" in carbon_amount(UsageData.model_validate(_usage("demo-small")))
