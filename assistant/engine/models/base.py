"""The one interface every provider implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from typing import TypeAlias

from ..catalogue import ModelInfo
from ..types import ModelRequest, Sampling, StreamPart


class Model(ABC):
    """A model: one streamed call at a time per ``stream`` invocation, safe to call concurrently.

    ``stream`` yields text deltas as they arrive, complete tool calls (accumulated by the adapter),
    the usage, then a finish part. It honours ``tool_choice`` (auto, required, none, or one named
    function), ``parallel_tool_calls``, ``max_output_tokens`` and ``reasoning_effort``.
    """

    api_model = ""
    """Its name at its provider, as requests send it (an adapter's own, else its catalogue id; "" for a model that
    did not say: its catalogue id then)."""

    def __init__(self, info: ModelInfo) -> None:
        self.info = info
        self.api_model = info.id

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]: ...

    def dropped(self, sampling: Sampling) -> tuple[str, ...]:
        """The parameters of ``sampling`` (OpenAI's names, ``max_tokens`` among them) that this model does not take:
        not sent to it (the API's ``warnings`` says so). A model takes none unless its adapter says otherwise."""
        return (*sampling.given(), *(("max_tokens",) if sampling.max_tokens is not None else ()))


ModelResolver: TypeAlias = Callable[[str], Model]
"""Returns the ``Model`` for a catalogue id."""
