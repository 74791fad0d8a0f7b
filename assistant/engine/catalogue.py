"""The model catalogue as the engine sees it: prices, limits and capabilities per model."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date

from .types import EFFORTS, Effort, UsagePart

DEMO_LABEL = "{name} (offline demo)"
"""How a demo model's label reads (in English: the pages word it in the reader's language)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """One catalogue entry. Prices are EUR per million tokens."""

    id: str
    provider: str
    display_name: str
    input_price: float
    cached_input_price: float
    output_price: float
    context_window: int
    output_cap: int
    reasoning_efforts: tuple[Effort, ...] = ()
    supports_tools: bool = True
    is_demo: bool = False
    carbon: Mapping[str, float] = field(default_factory=dict)
    price_date: date | None = None
    """When the catalogue recorded the prices (None: unknown)."""

    @property
    def reasons(self) -> bool:
        return bool(self.reasoning_efforts)

    @property
    def label(self) -> str:
        """The name shown wherever a model name shows; a demo model says it is one."""
        return DEMO_LABEL.format(name=self.display_name) if self.is_demo else self.display_name

    def effort_for(self, target: Effort | None) -> Effort | None:
        """The target effort if this model offers it, else the nearest it offers below, else None."""
        if target is None or not self.reasoning_efforts:
            return None
        for effort in reversed(EFFORTS[: EFFORTS.index(target) + 1]):
            if effort in self.reasoning_efforts:
                return effort
        return None

    def output_cap_for(self, requested: int | None, effort: Effort | None) -> int:
        """The output cap of a call: reasoning models get room for their thinking on top."""
        cap = requested if requested is not None else self.output_cap
        if effort is not None:
            cap = max(cap, min(self.output_cap, cap * 4))
        return min(cap, self.output_cap)

    def cost_eur(self, usage: UsagePart) -> float:
        """The price of one call's usage; cached prompt tokens are billed at the cached price."""
        fresh = max(usage.prompt_tokens - usage.cached_prompt_tokens, 0)
        return (
            fresh * self.input_price
            + usage.cached_prompt_tokens * self.cached_input_price
            + usage.completion_tokens * self.output_price
        ) / 1_000_000

    @property
    def blended_price(self) -> float:
        """One number to compare models by price (3 input tokens for 1 output token)."""
        return (3 * self.input_price + self.output_price) / 4


class Catalogue(Mapping[str, ModelInfo]):
    """Models by id."""

    def __init__(self, models: Iterable[ModelInfo]) -> None:
        self._models = {m.id: m for m in models}

    def __getitem__(self, key: str) -> ModelInfo:
        return self._models[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)

    def cheaper_than(self, model_id: str, allowed: Iterable[str], factor: float = 2.0) -> list[ModelInfo]:
        """Allowed models at least ``factor`` times cheaper than ``model_id``, cheapest first."""
        main = self._models[model_id]
        found = [
            self._models[m]
            for m in allowed
            if m in self._models
            and m != model_id
            and self._models[m].supports_tools
            and self._models[m].blended_price * factor <= main.blended_price
        ]
        return sorted(found, key=lambda m: m.blended_price)
