"""Builders shared by the provider tests: the real SDK adapters pointed at a local wire server."""

from __future__ import annotations

from dataclasses import dataclass, field

from wire import Dialect, WireServer

from assistant.engine.catalogue import ModelInfo
from assistant.engine.models.base import Model
from assistant.engine.models.mistral import MistralModel
from assistant.engine.models.openai import OpenAIModel
from assistant.engine.models.streaming import RetryPolicy
from assistant.engine.providers.mistral import MistralProvider
from assistant.engine.providers.openai import OpenAIProvider

FAST_RETRY = RetryPolicy(base_delay=0.01, max_delay=0.05)


@dataclass
class Wire:
    """A server speaking one dialect and the provider (real SDK client) that talks to it."""

    dialect: Dialect
    server: WireServer
    provider: OpenAIProvider | MistralProvider
    models: dict[str, Model] = field(default_factory=dict)

    def model(
        self,
        info: ModelInfo,
        *,
        api_model: str | None = None,
        retry: RetryPolicy = FAST_RETRY,
        native_reasoning: bool = False,
    ) -> Model:
        if isinstance(self.provider, OpenAIProvider):
            model: Model = OpenAIModel(info, self.provider, api_model=api_model, retry=retry)
        else:
            model = MistralModel(
                info, self.provider, api_model=api_model, retry=retry, adjustable_reasoning=not native_reasoning
            )
        self.models[info.id] = model
        return model


def make_provider(
    dialect: Dialect, server: WireServer, *, official: bool | None = None
) -> OpenAIProvider | MistralProvider:
    if dialect == "openai":
        return OpenAIProvider(api_key="sk-test", base_url=server.url + "/v1", timeout=10, official=official)
    return MistralProvider(api_key="test-key", base_url=server.url, timeout=10)
