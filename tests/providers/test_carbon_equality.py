"""call_impact gives what EcoLogits' compute_llm_impacts gives, for every kind of input (seeded random cases).

call_impact calls only the EcoLogits asset functions that energy and GWP need, with per-size values cached; this
compares it with the whole computation, so that an EcoLogits upgrade that changes the formulas or their wiring
fails here rather than drifting.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterator

import pytest
from ecologits.electricity_mix_repository import electricity_mixes
from ecologits.impacts.llm import compute_llm_impacts
from ecologits.utils.range_value import RangeValue, ValueOrRange

from assistant.engine.carbon import call_impact
from assistant.engine.catalogue import ModelInfo
from assistant.engine.usage import Impact

ZONES = [m.zone for m in electricity_mixes.list_electricity_mixes()]
REL = 1e-9


def ecologits_impact(info: ModelInfo, output_tokens: int, latency: float | None, zone: str) -> Impact:
    """The whole EcoLogits computation, called as call_impact is documented to be equal to."""
    c, mix = info.carbon, electricity_mixes.find_electricity_mix(zone=zone)
    assert mix is not None
    impacts = compute_llm_impacts(
        model_active_parameter_count=_value(c["active_params_min"], c["active_params_max"]),
        model_total_parameter_count=_value(c["total_params_min"], c["total_params_max"]),
        output_token_count=max(0, output_tokens),
        if_electricity_mix_adpe=mix.adpe,
        if_electricity_mix_pe=mix.pe,
        if_electricity_mix_gwp=mix.gwp,
        if_electricity_mix_wue=mix.wue,
        datacenter_pue=c["pue"],
        datacenter_wue=c["wue"],
        request_latency=latency if latency and latency > 0 else None,
        tps=c.get("tps"),
        ttft=c.get("ttft"),
    )
    return Impact(energy_kwh=_middle(impacts.energy.value), carbon_g=_middle(impacts.gwp.value) * 1000)


def _value(low: float, high: float) -> ValueOrRange:
    return low if low == high else RangeValue(min=low, max=high)


def _middle(value: ValueOrRange) -> float:
    return float(value.mean) if isinstance(value, RangeValue) else float(value)


def model(rng: random.Random, i: int) -> ModelInfo:
    """A model of a random size: exact, or a range of active and/or total parameters; tps/ttft given or not."""
    active = rng.choice([rng.uniform(0.3, 40), rng.uniform(40, 2000), float(rng.choice([8, 41, 70, 120]))])
    total = active * rng.choice([1.0, rng.uniform(1, 20)])
    shape = i % 4  # exact; active range; total range; both
    active_max = active * rng.uniform(1.01, 4) if shape in (1, 3) else active
    total_max = max(total * rng.uniform(1.01, 4), active_max) if shape in (2, 3) else max(total, active_max)
    carbon: dict[str, float] = {
        "active_params_min": active,
        "active_params_max": active_max,
        "total_params_min": total,
        "total_params_max": total_max,
        "pue": rng.uniform(1.0, 2.0),
        "wue": rng.uniform(0.0, 3.0),
    }
    if i % 8 == 7:  # whole numbers, as the demo models' entries are written
        carbon = {k: round(v) or 1 for k, v in carbon.items()}
    if rng.random() < 0.5:
        carbon["tps"] = rng.uniform(5, 500)
    ttft = rng.random()
    if ttft < 0.5:
        carbon["ttft"] = 0.0 if ttft < 0.1 else rng.uniform(0.05, 10)
    return ModelInfo(
        id=f"m{i}",
        provider="p",
        display_name="M",
        input_price=1,
        cached_input_price=1,
        output_price=1,
        context_window=1000,
        output_cap=1000,
        carbon=carbon,
    )


def modelled_latency(info: ModelInfo, tokens: int) -> float:
    """Roughly where EcoLogits switches from its latency model to the measured latency (min of the two)."""
    c = info.carbon
    per_token = 1 / c["tps"] if "tps" in c else 0.0006785 * c["active_params_min"] + 0.0003119 * 64 + 0.01947
    return tokens * per_token + (c.get("ttft") or 0)


def cases(n: int) -> Iterator[tuple[ModelInfo, int, float | None, str]]:
    rng = random.Random(20251113)
    for i in range(n):
        info = model(rng, i)
        tokens = rng.choice([0, 1, int(10 ** rng.uniform(0, 5)), rng.randint(0, 100_000)])
        kind = i % 6
        latency: float | None
        if kind == 0:
            latency = None
        elif kind == 1:
            latency = rng.choice([0.0, -1.0])
        elif kind == 2:
            latency = rng.uniform(1e-4, 0.5)  # small: the measured latency wins
        elif kind == 3:
            latency = rng.uniform(1e3, 1e5)  # large: the modelled latency wins
        else:  # either side of the crossover
            latency = modelled_latency(info, tokens) * rng.choice([0.999, 1.001, rng.uniform(0.2, 5)]) or 0.5
        yield info, tokens, latency, ZONES[i % len(ZONES)]


@pytest.mark.parametrize("block", range(4))  # 4 × 600 cases (the test suite runs them in parallel)
def test_call_impact_equals_compute_llm_impacts_on_random_inputs(block: int) -> None:
    all_cases = list(cases(2400))
    for info, tokens, latency, zone in all_cases[block * 600 : (block + 1) * 600]:
        ours = call_impact(info, tokens, latency, zone)
        theirs = ecologits_impact(info, tokens, latency, zone)
        assert ours is not None, (info.carbon, tokens, latency, zone)
        assert math.isclose(ours.energy_kwh, theirs.energy_kwh, rel_tol=REL), (info.carbon, tokens, latency, zone)
        assert math.isclose(ours.carbon_g, theirs.carbon_g, rel_tol=REL), (info.carbon, tokens, latency, zone)


def test_the_cases_cover_every_kind_of_input() -> None:
    all_cases = list(cases(2400))
    carbons = [info.carbon for info, *_ in all_cases]
    assert {z for *_, z in all_cases} == set(ZONES)
    assert any(
        c["active_params_min"] == c["active_params_max"] and c["total_params_min"] == c["total_params_max"]
        for c in carbons
    )
    assert any(c["active_params_min"] < c["active_params_max"] for c in carbons)
    assert any(
        c["active_params_min"] == c["active_params_max"] and c["total_params_min"] < c["total_params_max"]
        for c in carbons
    )
    assert any("tps" in c for c in carbons) and any("tps" not in c for c in carbons)
    assert any(c.get("ttft") == 0 for c in carbons) and any(c.get("ttft") for c in carbons)
    assert any(t == 0 for _, t, *_ in all_cases) and max(t for _, t, *_ in all_cases) > 50_000
    latencies = [(info, t, lat) for info, t, lat, _ in all_cases]
    assert any(lat is None for *_, lat in latencies) and any(lat == 0 for *_, lat in latencies)
    # Both branches of EcoLogits' min(measured latency, modelled latency) are taken.
    assert any(lat and 0 < lat < modelled_latency(info, t) for info, t, lat in latencies)
    assert any(lat and lat > modelled_latency(info, t) > 0 for info, t, lat in latencies)


def test_a_range_out_of_order_is_refused_as_ecologits_refuses_it() -> None:
    info = next(iter(cases(1)))[0]
    backwards = dataclasses.replace(info, carbon={**info.carbon, "active_params_min": 50.0, "active_params_max": 10.0})
    with pytest.raises(ValueError):
        ecologits_impact(backwards, 100, 1.0, "WOR")
    with pytest.raises(ValueError):
        call_impact(backwards, 100, 1.0, "WOR")
