"""Energy and carbon per call with EcoLogits' direct computation, offline, from the catalogue's data."""

from __future__ import annotations

import dataclasses

import pytest
from ecologits.tracers.utils import llm_impacts

from assistant.catalogue.loading import infos_from_file
from assistant.engine.carbon import call_impact
from assistant.engine.types import UsagePart
from assistant.engine.usage import Impact, RunUsage

INFOS = {m.id: m for m in infos_from_file()}


def test_a_call_is_estimated_as_ecologits_estimates_it() -> None:
    # The shipped mistral-small entry carries EcoLogits' own parameters for mistral-small-latest.
    ours = call_impact(INFOS["mistral-small"], output_tokens=400, latency_seconds=3.0, zone="FRA")
    theirs = llm_impacts("mistralai", "mistral-small-latest", 400, 3.0, electricity_mix_zone="FRA")
    assert ours is not None and theirs.energy is not None and theirs.gwp is not None
    assert ours.energy_kwh == pytest.approx(theirs.energy.value)
    assert ours.carbon_g == pytest.approx(theirs.gwp.value * 1000)
    assert ours.carbon_g > 0


def test_a_range_of_parameters_gives_the_middle_of_the_range() -> None:
    impact = call_impact(INFOS["gpt-5"], output_tokens=1_000, latency_seconds=None, zone="WOR")
    theirs = llm_impacts("openai", "gpt-5", 1_000, float("inf"), electricity_mix_zone="WOR")
    assert impact is not None and theirs.gwp is not None
    assert not isinstance(theirs.gwp.value, int | float)  # a range: the latency is not known
    assert impact.carbon_g == pytest.approx(theirs.gwp.value.mean * 1000)


def test_the_electricity_zone_matters() -> None:
    france = call_impact(INFOS["mistral-large"], 500, 5.0, "FRA")
    world = call_impact(INFOS["mistral-large"], 500, 5.0, "WOR")
    assert france is not None and world is not None
    assert france.energy_kwh == pytest.approx(world.energy_kwh)
    assert france.carbon_g < world.carbon_g


def test_no_estimate_without_data_rather_than_a_made_up_one() -> None:
    undescribed = dataclasses.replace(INFOS["mistral-small"], id="local-model", carbon={})  # nobody gave its size
    assert call_impact(undescribed, 500, 1.0, "FRA") is None
    assert call_impact(INFOS["gpt-4o-mini"], 500, 1.0, "ATLANTIS") is None


def test_run_usage_adds_carbon_per_model_and_in_total() -> None:
    usage = RunUsage()
    usage.add("gpt-5", UsagePart(1_000, 200), 0.01, Impact(energy_kwh=0.002, carbon_g=0.5))
    usage.add("gpt-5", UsagePart(1_500, 100), 0.01, Impact(energy_kwh=0.001, carbon_g=0.25))
    usage.add("gpt-4o-mini", UsagePart(800, 50), 0.001, Impact(energy_kwh=0.0001, carbon_g=0.02))
    data = usage.as_dict()
    assert data["carbon_g"] == pytest.approx(0.77)
    assert data["energy_wh"] == pytest.approx(3.1)
    assert data["carbon_estimated"] is True
    by_model = data["by_model"]
    assert isinstance(by_model, dict)
    assert by_model["gpt-5"]["carbon_g"] == pytest.approx(0.75)
    assert by_model["gpt-4o-mini"]["energy_wh"] == pytest.approx(0.1)

    usage.add("demo-small", UsagePart(100, 10), 0.0)  # no carbon data: no made-up zero per model
    data = usage.as_dict()
    assert "carbon_g" not in data["by_model"]["demo-small"]
    assert data["carbon_estimated"] is False and data["carbon_g"] == pytest.approx(0.77)


def test_the_answer_footer_shows_the_estimate_or_why_there_is_none() -> None:
    from django.utils import translation

    from assistant.chat.presenters import carbon_line

    estimated = {"carbon_g": 0.04213, "carbon_estimated": True}
    assert carbon_line(estimated) == "Carbon: 0.042 g CO₂e"
    assert carbon_line({"carbon_g": 12.34, "carbon_estimated": False}).startswith("Carbon: at least 12.3 g CO₂e")
    assert carbon_line({"carbon_g": 0.0, "carbon_estimated": False}) == (
        "Carbon: not estimated (no carbon data for these models)"
    )
    assert carbon_line({}) == ""
    with translation.override("fr"):
        assert carbon_line(estimated) == "Carbone : 0,042 g CO₂e"  # in the reader's number format
