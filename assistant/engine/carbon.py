"""Energy and carbon of one model call, with EcoLogits' direct impact computation (offline).

EcoLogits models a call's energy from the model's active and total parameter counts (billions),
the tokens it generated and its latency, then its impacts from the data centre's PUE and WUE and
the electricity mix of a zone (ISO 3166-1 alpha-3, e.g. ``FRA``; ``WOR`` is the world average).
The parameters come from the catalogue entry's ``carbon`` mapping:

- ``active_params_min`` / ``active_params_max`` and ``total_params_min`` / ``total_params_max``
  (equal bounds for a published size, a range for an estimated one);
- ``pue`` and ``wue`` of the provider's data centres;
- optionally ``tps`` (tokens per second) and ``ttft`` (seconds to the first token) of the deployment.

A range gives a range; the usage keeps its middle. A model without these parameters (a local model
nobody described) has no estimate rather than a made-up one. The offline demo models carry those of a
real model of their size (``models/demo/info.py``), and the pages say their figure is the demo's estimate.
"""

from __future__ import annotations

from collections.abc import Mapping

from ecologits.electricity_mix_repository import electricity_mixes
from ecologits.impacts.llm import compute_llm_impacts
from ecologits.utils.range_value import RangeValue, ValueOrRange

from .catalogue import ModelInfo
from .usage import Impact

DEFAULT_ZONE = "WOR"
CARBON_KEYS = ("active_params_min", "active_params_max", "total_params_min", "total_params_max", "pue", "wue")


def has_carbon_data(carbon: Mapping[str, float]) -> bool:
    """Whether a catalogue entry carries what the computation needs."""
    return all(k in carbon for k in CARBON_KEYS)


def known_zone(zone: str) -> bool:
    return electricity_mixes.find_electricity_mix(zone=zone) is not None


def call_impact(
    info: ModelInfo, output_tokens: int, latency_seconds: float | None, zone: str = DEFAULT_ZONE
) -> Impact | None:
    """The energy and carbon of one call, or None when the model or the zone has no data."""
    c = info.carbon
    if not has_carbon_data(c):
        return None
    mix = electricity_mixes.find_electricity_mix(zone=zone)
    if mix is None:
        return None
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
        request_latency=latency_seconds if latency_seconds and latency_seconds > 0 else None,
        tps=c.get("tps"),
        ttft=c.get("ttft"),
    )
    return Impact(energy_kwh=_middle(impacts.energy.value), carbon_g=_middle(impacts.gwp.value) * 1000)


def _value(low: float, high: float) -> ValueOrRange:
    return low if low == high else RangeValue(min=low, max=high)


def _middle(value: ValueOrRange) -> float:
    return float(value.mean) if isinstance(value, RangeValue) else float(value)
