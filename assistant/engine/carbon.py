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
real model of their size (``demo/model/info.py``), and the pages say their figure is the demo's estimate.

How (cost): EcoLogits' ``compute_llm_impacts`` runs its DAG of 17 assets once per end of the range, with pydantic
models and ``RangeValue`` arithmetic, for 8 impact fields; we keep two (energy and GWP). ``call_impact`` calls the
same asset functions of ``ecologits.impacts.llm`` for only those two, with the same constants and in the same order
(``gpu_energy``, ``generation_latency``, ``server_energy``, ``request_it_energy``, ``request_energy``,
``request_usage_gwp``, ``request_embodied_gwp``); what depends only on the model's size (its GPU count and the
embodied GWP of its share of a server) is computed once per size (``_bounds``, cached). The range is merged as
``compute_llm_impacts`` merges it (low end's value, high end's value, GWP = usage + embodied) and its middle kept.
``tests/providers/test_carbon_equality.py`` compares the result with ``compute_llm_impacts`` on seeded random inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple

from ecologits.electricity_mix_repository import electricity_mixes
from ecologits.impacts import llm
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
    """The energy and carbon of one call, or None when the model or the zone has no data.

    Equal to ``compute_llm_impacts``' energy and GWP (the middle of a range) for the same inputs.
    """
    c = info.carbon
    if not has_carbon_data(c):
        return None
    mix = electricity_mixes.find_electricity_mix(zone=zone)
    if mix is None:
        return None
    bounds = _bounds(c["active_params_min"], c["active_params_max"], c["total_params_min"], c["total_params_max"])
    tokens = max(0, output_tokens)
    request_latency = latency_seconds if latency_seconds and latency_seconds > 0 else math.inf
    pue, tps, ttft, mix_gwp = c["pue"], c.get("tps"), c.get("ttft"), mix.gwp
    low = _energy_and_gwp(bounds[0], tokens, request_latency, pue, tps, ttft, mix_gwp)
    if len(bounds) == 1:
        return Impact(energy_kwh=low[0], carbon_g=(low[1] + low[2]) * 1000)
    high = _energy_and_gwp(bounds[1], tokens, request_latency, pue, tps, ttft, mix_gwp)
    # compute_llm_impacts: RangeValue(min=low, max=high) per field, then GWP = usage + embodied; we keep the mean.
    energy = (low[0] + high[0]) / 2
    carbon = ((low[1] + low[2]) + (high[1] + high[2])) / 2
    return Impact(energy_kwh=energy, carbon_g=carbon * 1000)


class _Bound(NamedTuple):
    """One end of a model's parameter range, with what depends only on its size."""

    active_params: float
    gpu_count: int
    embodied_gwp: float  # kgCO2eq of the GPUs it needs and their share of a server


@lru_cache(maxsize=1024)
def _bounds(active_min: float, active_max: float, total_min: float, total_max: float) -> tuple[_Bound, ...]:
    """The ends of the range compute_llm_impacts runs: one for an exact size, two when either count is a range.

    A range whose bounds are out of order raises ValueError, as ``compute_llm_impacts``' ``RangeValue`` does.
    """
    active, total = _value(active_min, active_max), _value(total_min, total_max)
    if isinstance(active, RangeValue) or isinstance(total, RangeValue):
        ends = [(active_min, total_min), (active_max, total_max)]
    else:
        ends = [(active_min, total_min)]
    return tuple(_bound(a, t) for a, t in ends)


def _bound(active_params: float, total_params: float) -> _Bound:
    memory = llm.model_required_memory(
        model_total_parameter_count=total_params, model_quantization_bits=llm.MODEL_QUANTIZATION_BITS
    )
    gpus = llm.gpu_required_count(model_required_memory=memory, gpu_memory=llm.GPU_MEMORY)
    embodied = llm.server_gpu_embodied_gwp(
        server_embodied_gwp=llm.SERVER_EMBODIED_IMPACT_GWP,
        server_gpu_count=llm.SERVER_GPUS,
        gpu_embodied_gwp=llm.GPU_EMBODIED_IMPACT_GWP,
        gpu_required_count=gpus,
    )
    return _Bound(active_params, gpus, embodied)


def _energy_and_gwp(
    bound: _Bound,
    tokens: int,
    request_latency: float,
    pue: float,
    tps: float | None,
    ttft: float | None,
    mix_gwp: float,
) -> tuple[float, float, float]:
    """EcoLogits' DAG for one end of the range, down to the request's energy (kWh), usage and embodied GWP (kg)."""
    latency = llm.generation_latency(
        model_active_parameter_count=bound.active_params,
        output_token_count=tokens,
        batch_size=llm.BATCH_SIZE,
        latency_alpha=llm.LATENCY_ALPHA,
        latency_beta=llm.LATENCY_BETA,
        latency_gamma=llm.LATENCY_GAMMA,
        request_latency=request_latency,
        tps=tps,
        ttft=ttft,
    )
    gpu_energy = llm.gpu_energy(
        model_active_parameter_count=bound.active_params,
        output_token_count=tokens,
        batch_size=llm.BATCH_SIZE,
        gpu_energy_alpha=llm.GPU_ENERGY_ALPHA,
        gpu_energy_beta=llm.GPU_ENERGY_BETA,
        gpu_energy_gamma=llm.GPU_ENERGY_GAMMA,
    )
    server_energy = llm.server_energy(
        generation_latency=latency,
        server_power=llm.SERVER_POWER,
        server_gpu_count=llm.SERVER_GPUS,
        gpu_required_count=bound.gpu_count,
        batch_size=llm.BATCH_SIZE,
    )
    it_energy = llm.request_it_energy(
        server_energy=server_energy, gpu_required_count=bound.gpu_count, gpu_energy=gpu_energy
    )
    energy = llm.request_energy(datacenter_pue=pue, request_it_energy=it_energy)
    usage_gwp = llm.request_usage_gwp(request_energy=energy, if_electricity_mix_gwp=mix_gwp)
    embodied_gwp = llm.request_embodied_gwp(
        server_gpu_embodied_gwp=bound.embodied_gwp,
        server_lifetime=llm.HARDWARE_LIFESPAN,
        generation_latency=latency,
        batch_size=llm.BATCH_SIZE,
    )
    return energy, usage_gwp, embodied_gwp


def _value(low: float, high: float) -> ValueOrRange:
    return low if low == high else RangeValue(min=low, max=high)
