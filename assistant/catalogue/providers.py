"""The model providers this server knows, each registered by the app that brings it, from its ``AppConfig.ready``.

A provider says whether it can be used here (its key), what configuration its models depend on (a change drops
the catalogue's snapshot), and makes the engine's ``Model`` for one of its catalogue entries. This app
registers the real providers (OpenAI, or a compatible server, and Mistral); ``assistant.demo`` registers the
offline demo provider, which brings its own models and says which real model's carbon parameters each carries.
Nothing here names the demo: a server without it simply has no provider ``demo``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from django.conf import settings

from assistant.engine.catalogue import ModelInfo
from assistant.engine.models.base import Model
from assistant.engine.models.mistral import MistralModel
from assistant.engine.models.openai import OpenAIModel
from assistant.engine.models.responses import ResponsesModel
from assistant.engine.providers.mistral import MistralProvider
from assistant.engine.providers.openai import OpenAIProvider


@dataclass(frozen=True, slots=True)
class Offer:
    """How to reach one catalogue model: its provider, its name there, whether it takes a reasoning effort, and
    whether it is called through OpenAI's Responses API (else Chat Completions)."""

    provider: str
    api_model: str
    adjustable_reasoning: bool
    responses: bool = False


class Provider(Protocol):
    @property
    def name(self) -> str:
        """The catalogue's ``provider`` of its entries."""

    @property
    def models(self) -> tuple[ModelInfo, ...]:
        """The models it ships itself (``load_catalogue`` adds their entries); a real provider's are in the file."""

    @property
    def carbon_as(self) -> Mapping[str, tuple[str, str]]:
        """For a model that carries a real model's carbon parameters: that model's catalogue id and name."""

    def unavailable_reason(self) -> str:
        """Why it cannot be used in this deployment (its key is not set), or "" when it can."""

    def config(self) -> tuple[str | None, ...]:
        """What its models depend on in the settings: a change re-reads the catalogue."""

    def model(self, info: ModelInfo, offer: Offer) -> Model:
        """The engine's model for one of its entries."""


_registered: dict[str, Provider] = {}


def register(provider: Provider) -> None:
    """Offer ``provider``'s entries of the catalogue (called from its app's ``AppConfig.ready``)."""
    _registered[provider.name] = provider


def provider(name: str) -> Provider | None:
    return _registered.get(name)


def registered() -> tuple[Provider, ...]:
    return tuple(_registered.values())


def carbon_as() -> dict[str, tuple[str, str]]:
    """Every registered provider's models that carry a real model's carbon parameters (the demo's)."""
    return {model_id: real for p in _registered.values() for model_id, real in p.carbon_as.items()}


def config() -> tuple[str | None, ...]:
    return tuple(value for name in sorted(_registered) for value in (name, *_registered[name].config()))


P = TypeVar("P", OpenAIProvider, MistralProvider)
# One client (one connection pool) per event loop and configuration: a pool must not outlive its loop.
_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str | None, ...], OpenAIProvider | MistralProvider]
] = weakref.WeakKeyDictionary()


def in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _shared(key: tuple[str | None, ...], make: Callable[[], P]) -> P:
    """The client for ``key`` in the running event loop, made once per loop."""
    if not in_event_loop():
        return make()
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    if key not in per_loop:
        per_loop[key] = make()
    return cast(P, per_loop[key])


async def aclose_clients() -> None:
    """Close the connections this event loop's clients hold (shutdown, tests)."""
    for client in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.aclose()


class _Keyed:
    """A real provider: offered when its key setting is set, reached at its base URL setting."""

    models: tuple[ModelInfo, ...] = ()
    carbon_as: Mapping[str, tuple[str, str]] = {}

    def __init__(self, name: str, key_setting: str, url_setting: str) -> None:
        self.name, self.key_setting, self.url_setting = name, key_setting, url_setting

    def unavailable_reason(self) -> str:
        return "" if self.key() else f"{self.key_setting} is not set"

    def config(self) -> tuple[str | None, ...]:
        return (self.key(), self.url())

    def key(self) -> str:
        return str(getattr(settings, self.key_setting, "") or "")

    def url(self) -> str | None:
        return str(getattr(settings, self.url_setting, "") or "") or None


class OpenAI(_Keyed):
    def model(self, info: ModelInfo, offer: Offer) -> Model:
        key, url = self.key(), self.url()
        client = _shared((self.name, key, url), lambda: OpenAIProvider(api_key=key, base_url=url))
        if offer.responses:
            return ResponsesModel(info, client, api_model=offer.api_model)
        return OpenAIModel(info, client, api_model=offer.api_model)


class Mistral(_Keyed):
    def model(self, info: ModelInfo, offer: Offer) -> Model:
        key, url = self.key(), self.url()
        client = _shared((self.name, key, url), lambda: MistralProvider(api_key=key, base_url=url))
        return MistralModel(info, client, api_model=offer.api_model, adjustable_reasoning=offer.adjustable_reasoning)
