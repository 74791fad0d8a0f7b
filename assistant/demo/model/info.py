"""The demo models' catalogue entries: made-up prices, so that the demo shows costs and which model is cheaper.

Their carbon parameters are those of a real model of their size and price, as the shipped catalogue
(``assistant/catalogue/data/models.json``: EcoLogits 0.11.3's parameter counts, Mistral's PUE and WUE)
carries them: demo-large is counted as Mistral Large 3 (675B parameters, 41B active), demo-small as
Mistral Small 4 (119B, 8B active). What the demo's calls show is that model's estimate for the tokens the
demo wrote; the pages say it is the demo's estimate (``CARBON_AS`` names the model).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from assistant.engine.catalogue import ModelInfo

_MISTRAL_DATA_CENTRES = {"pue": 1.16, "wue": 0.09}

CARBON_AS: Mapping[str, tuple[str, str]] = {
    "demo-large": ("mistral-large", "Mistral Large 3"),
    "demo-small": ("mistral-small", "Mistral Small 4"),
}
"""For each demo model, the catalogue id and the name of the real model whose carbon parameters it carries."""

PRICE_DATE = date(2025, 12, 1)
"""When the demo's made-up prices were set."""

DEMO_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="demo-large",
        provider="demo",
        display_name="Demo Large",
        input_price=2.0,
        cached_input_price=0.5,
        output_price=6.0,
        context_window=128_000,
        output_cap=8_192,
        reasoning_efforts=("low", "medium", "high"),
        is_demo=True,
        price_date=PRICE_DATE,
        carbon={
            "total_params_min": 675,
            "total_params_max": 675,
            "active_params_min": 41,
            "active_params_max": 41,
            "tps": 59.2,
            "ttft": 0.63,
            **_MISTRAL_DATA_CENTRES,
        },
    ),
    ModelInfo(
        id="demo-small",
        provider="demo",
        display_name="Demo Small",
        input_price=0.2,
        cached_input_price=0.05,
        output_price=0.6,
        context_window=32_000,
        output_cap=4_096,
        is_demo=True,
        price_date=PRICE_DATE,
        carbon={
            "total_params_min": 119,
            "total_params_max": 119,
            "active_params_min": 8,
            "active_params_max": 8,
            **_MISTRAL_DATA_CENTRES,
        },
    ),
)
