"""The demo models' catalogue entries: made-up prices, so that the demo shows costs and which model is cheaper.

Carbon parameters (what a real model of the same size carries) go in each entry's ``carbon``.
"""

from __future__ import annotations

from ...catalogue import ModelInfo

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
    ),
)
