"""Builders shared by the engine tests: a catalogue, knowledge bases, scripted models and a harness.

Every model is a ``FunctionModel`` (or a small ``Model`` written in a test) behind the same interface
the real providers implement; runs go through ``run_chat`` as users' runs do.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from assistant.engine.catalogue import Catalogue, ModelInfo
from assistant.engine.causes import Cause
from assistant.engine.events import Event
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import RunOutcome, run_chat
from assistant.engine.models.base import Model
from assistant.engine.models.function import CallInfo, FunctionModel, ModelFunction
from assistant.engine.notes import without_note
from assistant.engine.policy import Level, Policy, RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, KnowledgeBackend, Toolbox, ToolFactory
from assistant.engine.types import Message, ModelRequest, ModelResponse, NamedTool, ToolCall, UsagePart

# The catalogue -------------------------------------------------------------------------------

MAIN = ModelInfo(
    id="main-large",
    provider="test",
    display_name="Main Large",
    input_price=4.0,
    cached_input_price=1.0,
    output_price=16.0,
    context_window=128_000,
    output_cap=8_192,
    reasoning_efforts=("low", "medium", "high"),
)  # blended price 7.0
AGENT_A = ModelInfo(
    id="agent-a",
    provider="test",
    display_name="Agent A",
    input_price=0.4,
    cached_input_price=0.1,
    output_price=1.6,
    context_window=32_000,
    output_cap=4_096,
)  # blended 0.7: ten times cheaper
AGENT_B = ModelInfo(
    id="agent-b",
    provider="test",
    display_name="Agent B",
    input_price=0.8,
    cached_input_price=0.2,
    output_price=2.4,
    context_window=32_000,
    output_cap=4_096,
)  # blended 1.2: almost six times cheaper
MID = ModelInfo(
    id="mid-medium",
    provider="test",
    display_name="Mid Medium",
    input_price=2.4,
    cached_input_price=0.6,
    output_price=9.6,
    context_window=64_000,
    output_cap=4_096,
)  # blended 4.2: only 1.67 times cheaper, never offered to agents
BANNED = ModelInfo(
    id="banned-tiny",
    provider="test",
    display_name="Banned Tiny",
    input_price=0.1,
    cached_input_price=0.02,
    output_price=0.3,
    context_window=16_000,
    output_cap=2_048,
)  # the cheapest, but the organisation in the policy tests does not allow it

CATALOGUE = Catalogue([MAIN, AGENT_A, AGENT_B, MID, BANNED])
INFOS = {m.id: m for m in CATALOGUE.values()}

# Knowledge bases ------------------------------------------------------------------------------

FACTURES = [
    Document(
        "fac-1",
        "factures",
        "Facture Zorglub mars 2024",
        "La facture de mars 2024 du client Zorglub s'élève à 12 400 EUR. Elle a été payée avec 45 jours de retard.",
    ),
    Document("fac-2", "factures", "Facture Acme janvier 2024", "Acme a payé sa facture de 3 000 EUR à temps en 2024."),
]
CONTRATS = [
    Document(
        "con-1",
        "contrats",
        "Contrat cadre Zorglub",
        "Le contrat cadre de Zorglub, signé en 2023, prévoit un paiement à 30 jours et une pénalité de 2 %.",
    ),
    Document("con-2", "contrats", "Avenant Zorglub 2024", "L'avenant de 2024 ajoute une révision annuelle des prix."),
]
ANNUAIRE = [Document("ann-1", "annuaire", "Annuaire interne", "Liste des bureaux et des numéros internes.")]


def knowledge() -> MemoryKnowledge:
    """Three knowledge bases; requests in the tests use ``factures`` and ``contrats``."""
    return MemoryKnowledge({"factures": FACTURES, "contrats": CONTRATS, "annuaire": ANNUAIRE})


# Scripted replies -----------------------------------------------------------------------------

_ids = itertools.count(1)


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call with a fresh id."""
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def reply(*calls: ToolCall, text: str = "", usage: UsagePart | None = None) -> ModelResponse:
    return ModelResponse(text=text, tool_calls=list(calls), usage=usage)


def submit(findings: str = "Rien à signaler.", sources: Sequence[str] = (), gaps: Sequence[str] = ()) -> ToolCall:
    return call("submit_result", findings=findings, sources=list(sources), gaps=list(gaps))


def task(
    instruction: str, model: str = "agent-a", resources: Sequence[str] = ("kb:factures",), **extra: Any
) -> dict[str, Any]:
    return {"instruction": instruction, "model": model, "resources": list(resources), **extra}


def delegate(*tasks: object) -> ToolCall:
    """The main model's call of the agents tool with ``tasks`` (dicts, or anything a test of bad input sends)."""
    return call("agents", tasks=list(tasks))


Step = ModelResponse | Callable[[ModelRequest], ModelResponse]


def scripted(*steps: Step) -> ModelFunction:
    """A model function replaying ``steps`` in order, one per call; one call too many fails the test."""

    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        assert info.index < len(steps), f"unexpected model call #{info.index + 1}"
        step = steps[info.index]
        return step(request) if callable(step) else step

    return function


# Reading requests -----------------------------------------------------------------------------


def tool_names(request: ModelRequest) -> set[str]:
    return {t.name for t in request.tools}


def tool_messages(request: ModelRequest, name: str | None = None) -> list[Message]:
    return [m for m in request.messages if m.role == "tool" and (name is None or m.name == name)]


def tool_payloads(request: ModelRequest, name: str) -> list[Any]:
    return [json.loads(without_note(m.content)) for m in tool_messages(request, name)]


def request_text(request: ModelRequest) -> str:
    """Everything a model call received, as one string: messages, their reasoning, tool calls and tool specs."""
    parts: list[str] = []
    for m in request.messages:
        parts.append(m.content)
        parts += [" ".join((r.id, r.encrypted, r.signature, *r.summary)) for r in m.reasoning]
        parts += [c.name + " " + c.arguments for c in m.tool_calls]
    for t in request.tools:
        parts += [t.name, t.description, json.dumps(t.parameters, ensure_ascii=False)]
    return "\n".join(parts)


def searchable_kbs(request: ModelRequest) -> list[str]:
    spec = next((t for t in request.tools if t.name == "kb_search"), None)
    return list(spec.parameters["properties"]["kb"]["enum"]) if spec else []


def forced(request: ModelRequest) -> bool:
    return request.tool_choice == NamedTool("submit_result")


def researcher(query: str = "Zorglub 2024", *, usage: UsagePart | None = None) -> ModelFunction:
    """An agent that searches its knowledge base, reads the hits in one call, then submits its findings.

    When its last call is forced, it submits at once with what it has.
    """

    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        kbs = searchable_kbs(request)
        searches = tool_payloads(request, "kb_search")
        reads = [d for p in tool_payloads(request, "kb_read") for d in p.get("documents", [])]
        hit_ids = [h["id"] for p in searches for h in p.get("hits", [])]
        if not forced(request) and kbs and not searches:
            return reply(*(call("kb_search", query=query, kb=kb) for kb in kbs), usage=usage)
        if not forced(request) and hit_ids and not reads:
            return reply(call("kb_read", ids=hit_ids), usage=usage)
        findings = " ".join(
            f"{d['title']} [{d['id']}]." for d in reads
        ) or "Résultats de recherche seulement: " + ", ".join(hit_ids)
        return reply(submit(findings, [d["id"] for d in reads] or hit_ids), usage=usage)

    return function


# One delegation ---------------------------------------------------------------------------------
# The budget, result and landing tests all run the same delegation: the main model hands one search of ``factures``
# to agent A, then answers with what came back.

FINDINGS = "Zorglub a payé la facture de mars 2024 avec 45 jours de retard [fac-1]."


def main_delegating(**task_options: Any) -> ModelFunction:
    """A main model that delegates one task (``task_options`` added to it) to agent A, then answers "Réponse."."""
    return scripted(
        reply(
            delegate(task("Trouve les retards de paiement de Zorglub.", AGENT_A.id, ["kb:factures"], **task_options))
        ),
        reply(text="Réponse."),
    )


def endless_searcher(usage: UsagePart | None = None) -> ModelFunction:
    """An agent that would search forever, and submits ``FINDINGS`` only when its last call is forced."""

    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        if forced(request):
            return reply(submit(FINDINGS, ["fac-1"], ["les relances n'ont pas été vérifiées"]), usage=usage)
        return reply(call("kb_search", query=f"Zorglub retard {info.index}", kb="factures"), usage=usage)

    return function


def agents_told(request: ModelRequest) -> list[dict[str, Any]]:
    """What the ``agents`` tool's result in ``request`` told the main model, one entry per agent."""
    [payload] = tool_payloads(request, "agents")
    agents: list[dict[str, Any]] = payload["agents"]
    return agents


# Two agents, then Stop -------------------------------------------------------------------------
# The Stop tests delegate to two agents at once, each over its own base, and stop the run before the main model
# answers.

TWO_AGENTS_TEXT = "Je confie la recherche à deux agents."
OWN_DOCUMENT = {"factures": ("fac-1", "Facture Zorglub mars 2024"), "contrats": ("con-1", "Contrat cadre Zorglub")}
STOPPED_WITH_RUN = Cause(code="run_stopped", because=Cause(code="stopped_by_user"))
"""The cause of a tool call stopped with its run, the run stopped by the user."""


def main_delegating_to_two() -> ModelFunction:
    """A main model that says ``TWO_AGENTS_TEXT`` while it hands ``factures`` to agent A and ``contrats`` to agent B.

    Its answer, scripted after that, is never meant to be produced: the tests stop the run before it.
    """
    return scripted(
        reply(
            delegate(
                task("Lis la facture de Zorglub.", AGENT_A.id, ["kb:factures"]),
                task("Lis le contrat de Zorglub.", AGENT_B.id, ["kb:contrats"]),
            ),
            text=TWO_AGENTS_TEXT,
        ),
        reply(text="Cette réponse ne doit jamais être produite."),
    )


def read_own_document(request: ModelRequest) -> ModelResponse:
    """An agent's first round: reading the ``OWN_DOCUMENT`` of the one base it may search."""
    doc_id, _ = OWN_DOCUMENT[searchable_kbs(request)[0]]
    return reply(call("kb_read", ids=[doc_id]))


# The harness ----------------------------------------------------------------------------------

E = TypeVar("E")


@dataclass
class Harness:
    """A run context over the test catalogue, with the events it emitted and its models."""

    ctx: RunContext
    models: dict[str, Model]
    events: list[Event] = field(default_factory=list)

    def model(self, model_id: str) -> FunctionModel:
        m = self.models[model_id]
        assert isinstance(m, FunctionModel)
        return m

    @property
    def main(self) -> FunctionModel:
        return self.model(MAIN.id)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    async def run(
        self,
        question: str = "Quelle est la situation du client Zorglub ?",
        *,
        resources: Sequence[str] = ("kb:factures", "kb:contrats", "agents"),
        level: Level | None = "approfondi",
        history: Iterable[Message] = (),
        model: str = MAIN.id,
    ) -> RunOutcome:
        request = RunRequest(
            messages=(*history, Message.user(question)), model=model, level=level, resources=tuple(resources)
        )
        return await run_chat(request, self.ctx)


def harness(
    models: dict[str, ModelFunction | Model],
    *,
    policy: Policy | None = None,
    knowledge_backend: KnowledgeBackend | None = None,
    factories: Iterable[ToolFactory] = (),
    catalogue: Catalogue = CATALOGUE,
    latency: float = 0.0,
) -> Harness:
    """Wrap model functions into ``FunctionModel``s and build the run context.

    Asking for a model that is not in ``models`` raises, so a call to an unexpected model fails the run.
    """
    built: dict[str, Model] = {
        model_id: m if isinstance(m, Model) else FunctionModel(m, catalogue[model_id], latency=latency)
        for model_id, m in models.items()
    }
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ctx = RunContext(
        catalogue=catalogue,
        models=built.__getitem__,
        toolbox=Toolbox(knowledge=knowledge_backend or knowledge(), factories=list(factories)),
        emit=emit,
        policy=policy or Policy(),
    )
    return Harness(ctx=ctx, models=built, events=events)
