"""The demo provider and the demo web as the catalogue and the web tools reach them (registered by ``apps``)."""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings

from assistant.catalogue.models import DEMO_PROVIDER
from assistant.catalogue.providers import Offer
from assistant.engine.catalogue import ModelInfo
from assistant.engine.models.base import Model
from assistant.engine.tools import ToolFactory
from assistant.engine.web import WebConfig

from .model import CARBON_AS, DEMO_MODELS, DemoModel
from .web import demo_web, demo_web_tools, page_address


class DemoProvider:
    """The offline demo models: no key, no network; ``DEMO_PACE`` and ``DEMO_LATENCY`` set their pace."""

    name = DEMO_PROVIDER
    models: tuple[ModelInfo, ...] = DEMO_MODELS
    carbon_as: Mapping[str, tuple[str, str]] = CARBON_AS

    def unavailable_reason(self) -> str:
        return ""

    def config(self) -> tuple[str | None, ...]:
        return ()

    def model(self, info: ModelInfo, offer: Offer) -> Model:
        return DemoModel(info, pace=settings.DEMO_PACE, latency=settings.DEMO_LATENCY)


class DemoWebOffline:
    """The demo web as the web tools' offline web (``DEMO_WEB``)."""

    def tools(self, config: WebConfig) -> ToolFactory:
        return demo_web_tools(config)

    def page_count(self) -> int:
        return len(demo_web())

    def address(self, url: str) -> str | None:
        return page_address(url)
