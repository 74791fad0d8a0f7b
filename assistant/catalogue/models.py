"""The model catalogue: one row per model users may be offered, with prices, limits and carbon data.

Rows come from ``data/models.json`` (``manage.py load_catalogue``) and are edited in the admin.
A row is offered only when it is enabled and its provider has a key (``unavailable_reason``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from assistant.catalogue import providers
from assistant.engine.carbon import CARBON_KEYS
from assistant.engine.catalogue import ModelInfo
from assistant.engine.types import EFFORTS

DEMO_PROVIDER = "demo"
PROVIDERS = [("mistral", "Mistral"), ("openai", "OpenAI (or a compatible server)"), (DEMO_PROVIDER, "Offline demo")]
CHAT_COMPLETIONS = "chat_completions"
RESPONSES = "responses"
APIS = [
    (CHAT_COMPLETIONS, "Chat Completions"),
    (RESPONSES, "Responses API (OpenAI; keeps the model's reasoning between its tool calls)"),
]
REASONING = [
    ("none", "Does not reason"),
    ("adjustable", "Reasons at the effort it is sent"),
    ("native", "Always reasons (no effort parameter)"),
]


def provider_unavailable_reason(provider: str) -> str:
    """Why a provider cannot be used in this deployment (not registered, or its key not set), or "" when it can."""
    registered = providers.provider(provider)
    return registered.unavailable_reason() if registered else f"unknown provider '{provider}'"


def _price() -> models.DecimalField[Decimal, Decimal]:
    return models.DecimalField(max_digits=12, decimal_places=6, help_text="EUR per million tokens")


class CatalogueEntry(models.Model):
    model_id = models.CharField(
        "model id",
        max_length=100,
        unique=True,
        validators=[RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$", "Letters, digits and . _ : / - only.")],
        help_text="The id users and agents see (e.g. mistral-small, gpt-4.1, llama3.1:8b).",
    )
    provider = models.CharField(max_length=20, choices=PROVIDERS)
    api_model = models.CharField(
        "name on the provider", max_length=200, help_text="The model name the provider's API expects."
    )
    display_name = models.CharField(max_length=200)
    input_price = _price()
    cached_input_price = _price()
    output_price = _price()
    price_date = models.DateField(help_text="When the price was recorded.")
    price_source = models.CharField(max_length=300, help_text="Where the price comes from.")
    price_note = models.TextField(blank=True, help_text="The list price and the conversion to EUR, and any caveat.")
    context_window = models.PositiveIntegerField(help_text="Tokens; an agent's history is compacted at 75%.")
    output_cap = models.PositiveIntegerField(help_text="Most tokens one call may write.")
    api = models.CharField(
        "API",
        max_length=20,
        choices=APIS,
        default=CHAT_COMPLETIONS,
        help_text="OpenAI only: the Responses API for its reasoning models (their reasoning is sent back between tool "
        "calls); Chat Completions for the others, and for a compatible server that lacks the Responses API.",
    )
    reasoning = models.CharField(max_length=20, choices=REASONING, default="none")
    reasoning_efforts = models.JSONField(
        default=list, blank=True, help_text='Efforts the model offers, among "minimal", "low", "medium", "high".'
    )
    supports_tools = models.BooleanField(default=True)
    carbon = models.JSONField(
        default=dict,
        blank=True,
        help_text="EcoLogits parameters: " + ", ".join(CARBON_KEYS) + " (billions of parameters; PUE, WUE), "
        "optionally tps and ttft. Without them the model has no carbon estimate.",
    )
    enabled = models.BooleanField(default=True, help_text="Offered to users when its provider has a key.")
    offered_with_real_providers = models.BooleanField(
        default=False,
        help_text="Offline demo models only: also offered when a real provider (OpenAI, Mistral) is configured. "
        "Off, the demo models are offered only on a server with no real model, and stay out of real work.",
    )
    position = models.PositiveSmallIntegerField(default=0, help_text="Order in the model picker.")
    created = models.DateTimeField(auto_now_add=True, help_text="When it was added to this catalogue.")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "model_id"]
        verbose_name = "catalogue entry"
        verbose_name_plural = "catalogue"

    def __str__(self) -> str:
        return f"{self.display_name} ({self.model_id})"

    def unavailable_reason(self, real_models_offered: bool | None = None) -> str:
        """Why users are not offered this model, or "" when they are.

        A demo model is not offered next to real ones unless ``offered_with_real_providers``;
        ``real_models_offered`` says whether there are any (read from the database when None).
        """
        if not self.enabled:
            return "disabled in the catalogue"
        if self.provider == DEMO_PROVIDER and not self.offered_with_real_providers:
            if real_models_offered is None:
                real_models_offered = any(not e.unavailable_reason() for e in real_entries())
            if real_models_offered:
                return "a real provider is configured (tick “offered with real providers” to offer it too)"
        return provider_unavailable_reason(self.provider)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        shipped = providers.provider(DEMO_PROVIDER)
        if self.provider == DEMO_PROVIDER and self.model_id not in {m.id for m in (shipped.models if shipped else ())}:
            errors["provider"] = "Only the shipped demo models (demo-large, demo-small) are offline demo models."
        if self.provider != DEMO_PROVIDER and self.offered_with_real_providers:
            errors["offered_with_real_providers"] = "Only for offline demo models."
        if self.api == RESPONSES and self.provider != "openai":
            errors["api"] = "Only OpenAI (or a compatible server) has the Responses API."
        efforts = self.reasoning_efforts
        if not isinstance(efforts, list) or any(e not in EFFORTS for e in efforts):
            errors["reasoning_efforts"] = f"A list among {', '.join(EFFORTS)}."
        elif self.reasoning == "none" and efforts:
            errors["reasoning_efforts"] = "A model that does not reason offers no effort."
        elif self.reasoning != "none" and not efforts:
            errors["reasoning_efforts"] = "A model that reasons offers at least one effort."
        if not isinstance(self.carbon, dict):
            errors["carbon"] = "An object of numbers."
        elif any(k in self.carbon and not _is_number(self.carbon[k]) for k in (*CARBON_KEYS, "tps", "ttft")):
            errors["carbon"] = "Its parameters must be numbers."
        if errors:
            raise ValidationError(errors)

    def to_info(self) -> ModelInfo:
        """The engine's view of this entry."""
        carbon = {k: float(v) for k, v in (self.carbon or {}).items() if _is_number(v)}
        return ModelInfo(
            is_demo=self.provider == DEMO_PROVIDER,
            id=self.model_id,
            provider=self.provider,
            display_name=self.display_name,
            input_price=float(self.input_price),
            cached_input_price=float(self.cached_input_price),
            output_price=float(self.output_price),
            context_window=self.context_window,
            output_cap=self.output_cap,
            reasoning_efforts=tuple(e for e in EFFORTS if e in (self.reasoning_efforts or [])),
            supports_tools=self.supports_tools,
            carbon=carbon,
        )


def real_entries() -> models.QuerySet[CatalogueEntry]:
    return CatalogueEntry.objects.exclude(provider=DEMO_PROVIDER)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
