"""The catalogue and the models users can pick, as the Django side wires them into the engine."""

from __future__ import annotations

from django.conf import settings

from assistant.engine.catalogue import Catalogue
from assistant.engine.models.base import Model
from assistant.engine.models.demo import DEMO_MODELS, DemoModel


def catalogue() -> Catalogue:
    return Catalogue(DEMO_MODELS)


def resolve(model_id: str) -> Model:
    info = catalogue()[model_id]
    return DemoModel(info, pace=settings.DEMO_PACE, latency=settings.DEMO_LATENCY)
