"""A channel layer as a deployment with several processes has one (Redis), held in this process's memory.

``runs.local.in_process`` is true of the in-memory layer only: there every run executes in this process. With this
layer (``settings.CHANNEL_LAYERS``: ``use_shared_layer``) followers also join the runs' groups, as they do where runs
may execute in another process, and the tests see both ways a message arrives.
"""

from __future__ import annotations

from typing import Any

from channels.layers import InMemoryChannelLayer


class SharedLayer:
    """The in-memory layer's behaviour, without being one (so ``in_process`` is false)."""

    extensions = InMemoryChannelLayer.extensions

    def __init__(self, **config: Any) -> None:
        self._layer = InMemoryChannelLayer(**config)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._layer, name)


def use_shared_layer(settings: Any) -> None:
    """Make ``settings`` (pytest-django's fixture) name this layer: Channels makes it anew."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "tests.shared_layer.SharedLayer", "CONFIG": {"capacity": 5_000}}}
