"""What the benchmarks share: a two-model catalogue, a tiny in-memory corpus, scripted models, timing.

Everything here is engine-only (no Django): ``FunctionModel`` fakes stand for the providers.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from assistant.engine.catalogue import Catalogue, ModelInfo
from assistant.engine.events import AgentFinished, Event, FinalEvent, RoundStarted
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.models.function import FunctionModel, ModelFunction
from assistant.engine.policy import Policy
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Message, ModelRequest, ToolCall

MAIN = ModelInfo(
    id="bench-main",
    provider="bench",
    display_name="Bench main model",
    input_price=2.0,
    cached_input_price=0.5,
    output_price=8.0,
    context_window=128_000,
    output_cap=8_192,
)
AGENT = ModelInfo(
    id="bench-agent",
    provider="bench",
    display_name="Bench agent model",
    input_price=0.2,
    cached_input_price=0.05,
    output_price=0.8,
    context_window=128_000,
    output_cap=4_096,
)
CATALOGUE = Catalogue((MAIN, AGENT))


def knowledge() -> MemoryKnowledge:
    """Four tiny knowledge bases of three documents each."""
    docs = {
        "factures": [
            ("Facture Bimbamjob 2024-03", "Bimbamjob invoice of March 2024: 12,400 EUR, paid late by 45 days."),
            ("Facture Acme 2024-01", "Acme invoice of January 2024: 3,000 EUR, paid on time."),
            ("Facture Bimbamjob 2024-07", "Bimbamjob invoice of July 2024: 8,150 EUR, still unpaid in September."),
        ],
        "comptes-rendus": [
            (
                "Réunion Bimbamjob juin",
                "Meeting with Bimbamjob in June: they asked for a payment plan. Relationship tense.",
            ),
            ("Réunion Acme avril", "Meeting with Acme in April: renewal of the support contract agreed."),
            ("Point interne septembre", "Internal review: Bimbamjob payment delays flagged to the finance team."),
        ],
        "contrats": [
            ("Contrat Bimbamjob", "Framework contract with Bimbamjob, signed 2023-11, payment at 30 days."),
            ("Contrat Acme", "Support contract with Acme, renewed every April."),
            ("Avenant Bimbamjob", "Amendment of 2024-02: late payment penalties of 1% a month."),
        ],
        "relances": [
            ("Relance Bimbamjob août", "Reminder sent to Bimbamjob in August for the July invoice."),
            ("Relance Bimbamjob septembre", "Second reminder in September; Bimbamjob promised payment in October."),
            ("Relance Acme", "No reminder needed for Acme in 2024."),
        ],
    }
    return MemoryKnowledge(
        {
            kb: [Document(f"{kb}-{i + 1}", kb, title, text) for i, (title, text) in enumerate(items)]
            for kb, items in docs.items()
        }
    )


KNOWLEDGE_BASES = ("factures", "comptes-rendus", "contrats", "relances")

FINAL_ANSWER = (
    "Bimbamjob paid its March 2024 invoice of 12,400 EUR 45 days late [factures-1], and the July invoice "
    "of 8,150 EUR was still unpaid in September [factures-3]."
)


def call(request: ModelRequest, name: str, arguments: Mapping[str, object], n: int = 0) -> ToolCall:
    """A tool call with an id unique within the conversation."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    return ToolCall(id=f"call_{turn}_{n}", name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def tool_results(request: ModelRequest, name: str | None = None) -> list[Message]:
    return [m for m in request.messages if m.role == "tool" and (name is None or m.name == name)]


def enum_of(request: ModelRequest, tool: str, prop: str) -> list[str]:
    """The ``enum`` of one property of one tool the request offers (e.g. kb_search's ``kb``)."""
    spec = next(t for t in request.tools if t.name == tool)
    return [str(v) for v in spec.parameters["properties"][prop]["enum"]]


@dataclass(slots=True)
class Setup:
    """A run context over fresh ``FunctionModel`` instances, and those models (their ``requests``)."""

    ctx: RunContext
    main: FunctionModel
    agent: FunctionModel


def setup(
    main: ModelFunction,
    agent: ModelFunction | None = None,
    *,
    agent_latency: float = 0.0,
    policy: Policy | None = None,
    clock: RoundClock | None = None,
    toolbox: Toolbox | None = None,
) -> Setup:
    main_model = FunctionModel(main, MAIN)
    agent_model = FunctionModel(agent or main, AGENT, latency=agent_latency)
    models = {MAIN.id: main_model, AGENT.id: agent_model}
    ctx = RunContext(
        catalogue=CATALOGUE,
        models=models.__getitem__,
        toolbox=toolbox or Toolbox(knowledge=knowledge()),
        policy=policy or Policy(),
    )
    if clock is not None:
        ctx.emit = clock.emit
    return Setup(ctx, main_model, agent_model)


@dataclass(slots=True)
class RoundClock:
    """Times each model round from the run's events: a round lasts from its ``RoundStarted`` to the
    next one of the same loop (main loop or one agent), the last to ``FinalEvent`` or ``AgentFinished``.

    So a round's time is everything the engine does for it: the model call, streaming, usage
    accounting, the tool calls, the events and building the next request. Nothing is subtracted.
    """

    marks: dict[str | None, list[float]] = field(default_factory=dict)
    ends: dict[str | None, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.perf_counter

    async def emit(self, event: Event) -> None:
        if isinstance(event, RoundStarted):
            self.marks.setdefault(event.agent_id, []).append(self.clock())
        elif isinstance(event, FinalEvent | AgentFinished):
            self.ends[event.agent_id] = self.clock()

    def rounds(self, agents: bool) -> list[float]:
        """The durations of the rounds of the main loop (``agents=False``) or of every agent, in seconds."""
        out: list[float] = []
        for loop, marks in self.marks.items():
            if (loop is not None) != agents or loop not in self.ends:
                continue
            bounds = [*marks, self.ends[loop]]
            out += [b - a for a, b in itertools.pairwise(bounds)]
        return out


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0–100), by linear interpolation between closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: list[float]) -> float:
    return statistics.median(values)
