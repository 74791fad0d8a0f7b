"""How close a delegation's estimate comes to what it costs: actual ÷ ``estimate_eur`` over the demo's delegations."""

from __future__ import annotations

import ast
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from assistant.demo.model import DEMO_MODELS, DemoModel
from assistant.engine.catalogue import Catalogue
from assistant.engine.estimate import AgentGrowth, growth_of
from assistant.engine.events import AgentFinished, DelegationEstimated, Event, UsageEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import run_chat
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Message

from ..registry import Result, at_most, below, benchmark

# Questions the demo delegates, one agent per knowledge base, in both languages, over two or three bases.
QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Bimbamjob: invoicing 2024, payment follow-up, commercial relationship. Conclude on the risk.",
        ("factures", "comptes-rendus"),
    ),
    ("Fiche complète sur Bimbamjob : facturation 2024, suivi, risque", ("factures", "comptes-rendus")),
    ("Orchidée Logistique: invoices, meetings and contract in 2024", ("factures", "comptes-rendus", "contrats")),
    ("Tamaris Conseil : factures et comptes rendus 2024", ("factures", "comptes-rendus")),
    ("Verdant Foods: what was invoiced and discussed in 2024?", ("factures", "comptes-rendus")),
    ("Bimbamjob : contrat, factures et relation en 2024", ("factures", "comptes-rendus", "contrats")),
    ("Late payments in 2024: which clients, which invoices, what was said?", ("factures", "comptes-rendus")),
    ("Orchidée Logistique : retard de paiement de la phase 1 et suite du projet", ("factures", "comptes-rendus")),
)


LOAD_DEMO = Path(__file__).resolve().parents[2] / "assistant" / "demo" / "management" / "commands" / "load_demo.py"


def _shipped(name: str) -> Any:
    """A constant of ``load_demo`` (its documents), read from its source: importing it would import Django, which the
    benchmarks must not."""
    for node in ast.parse(LOAD_DEMO.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                return ast.literal_eval(node.value)
    raise LookupError(f"{name} is not in {LOAD_DEMO}")


def _knowledge() -> MemoryKnowledge:
    """The demo's knowledge bases, in English and in French, as ``load_demo`` ships them."""
    english: dict[str, tuple[str, str, list[tuple[str, str]]]] = _shipped("BASES")
    french: dict[str, list[tuple[str, str]]] = _shipped("FRENCH_DOCUMENTS")
    bases: dict[str, list[Document]] = defaultdict(list)
    for slug, (_name, _about, documents) in english.items():
        for title, text in [*documents, *french.get(slug, [])]:
            bases[slug].append(Document(f"doc-{slug}-{len(bases[slug]) + 1}", slug, title, text))
    return MemoryKnowledge(bases)


@benchmark("Delegation estimates", order=35)
async def delegation_estimates() -> list[Result]:
    """The demo's delegating questions (8, English and French, over two or three knowledge bases), each run
    through the engine with the offline demo models (`demo-large` delegating to `demo-small`, level Approfondi;
    no latency). Before each delegation the `agents` tool works out `estimate_eur` from the agents' first requests and
    the growth per round of the agents of the runs before it (the first run: the documented default), and
    `estimate_max_eur` from their round budgets. The figure is each run's agents' actual cost ÷ its `estimate_eur`,
    the median over the runs (aim: 0.5–2×); the notes give every run's, and the largest actual ÷ `estimate_max_eur`,
    which must stay under 1 (the bound the budgets enforce)."""
    knowledge = _knowledge()
    catalogue = Catalogue(DEMO_MODELS)
    models = {m.id: DemoModel(m) for m in DEMO_MODELS}
    seen: dict[str, list[list[tuple[int, int]]]] = defaultdict(list)  # each recent agent's calls, by model

    async def growth(model: str) -> AgentGrowth | None:
        return growth_of(seen[model])

    ratios: list[float] = []
    to_max: list[float] = []
    for question, kbs in QUESTIONS:
        events: list[Event] = []

        async def emit(event: Event, events: list[Event] = events) -> None:
            events.append(event)

        ctx = RunContext(
            catalogue=catalogue,
            models=models.__getitem__,
            toolbox=Toolbox(knowledge=knowledge),
            emit=emit,
            agent_growth=growth,
        )
        request = RunRequest(
            messages=(Message.user(question),),
            model="demo-large",
            level="approfondi",
            resources=(*(f"kb:{kb}" for kb in kbs), "agents"),
        )
        outcome = await run_chat(request, ctx)
        estimates = [e for e in events if isinstance(e, DelegationEstimated) and e.decision == "launched"]
        if outcome.status != "ok" or not estimates:
            raise RuntimeError(f"{question!r}: the run ended {outcome.status} with {len(estimates)} delegations")
        actual = sum(e.cost_eur for e in events if isinstance(e, AgentFinished))
        ratios.append(actual / sum(e.estimate_eur for e in estimates))
        to_max.append(actual / sum(e.estimate_max_eur for e in estimates))
        calls: dict[str, list[tuple[int, int]]] = defaultdict(list)
        models_of: dict[str, str] = {}
        for e in events:
            if isinstance(e, UsageEvent) and e.agent_id is not None:
                calls[e.agent_id].append((e.prompt_tokens, e.completion_tokens))
                models_of[e.agent_id] = e.model
        for agent_id, made in calls.items():
            seen[models_of[agent_id]].append(made)
    median = statistics.median(ratios)
    every = ", ".join(f"{r:.2f}" for r in ratios)
    return [
        Result(
            name="Delegation cost ÷ estimate_eur (median)",
            figure=median,
            unit="×",
            target=at_most(2.0),
            digits=2,
            notes=f"aim 0.5–2×; each of the {len(ratios)} runs, in order (the first with the default growth): {every}",
        ),
        Result(
            name="Delegation cost ÷ estimate_max_eur (largest)",
            figure=max(to_max),
            unit="×",
            target=below(1.0),
            digits=4,
            notes="the most within the agents' round budgets: a bound no delegation may reach",
        ),
    ]
