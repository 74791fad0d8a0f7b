"""Isolation (seed 000): an agent sees its instruction and its scope, nothing of the request or of another agent."""

from __future__ import annotations

from dataclasses import dataclass

from assistant.engine.agent import AGENT_SYSTEM_PROMPT
from assistant.engine.events import AgentFinished, FinalEvent
from assistant.engine.models.function import CallInfo, ModelFunction
from assistant.engine.types import Message, ModelRequest, ModelResponse, Reasoning
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    Harness,
    delegate,
    harness,
    reply,
    request_text,
    researcher,
    scripted,
    task,
)

QUESTION = "Quelle est la situation du client Zorglub ? Réponds avant vendredi, c'est pour le comité de direction."
HISTORY = (
    Message.user("Ancienne question : quel était le budget du séminaire de Lyon ?"),
    Message.assistant("Ancienne réponse : le séminaire de Lyon a coûté 8 000 EUR."),
)
INSTRUCTION_A = "Liste les factures du client Zorglub en 2024, avec montants et retards de paiement."
INSTRUCTION_B = "Résume les conditions de paiement prévues par les contrats de Zorglub."
# The main model's reasoning (it stays in the main loop: no agent ever receives it).
MAIN_REASONING = Reasoning(
    format="openai", id="rs_main", encrypted="chiffré-principal", summary=("Le comité veut la situation de Zorglub.",)
)


@dataclass(frozen=True)
class AgentScope:
    instruction: str
    kb: str
    ids: tuple[str, ...]


SCOPES = {
    AGENT_A.id: AgentScope(INSTRUCTION_A, "factures", ("fac-1", "fac-2")),
    AGENT_B.id: AgentScope(INSTRUCTION_B, "contrats", ("con-1", "con-2")),
}


def reasoning_of(agent: str, index: int) -> Reasoning:
    return Reasoning(
        format="openai", id=f"rs_{agent}_{index}", encrypted=f"secret-{agent}-{index}", summary=(f"think {agent}",)
    )


def reasoning_researcher(agent: str) -> ModelFunction:
    """``researcher``, reasoning in each turn (its reasoning stays in its own history)."""
    research = researcher()

    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        response = research(request, info)
        assert isinstance(response, ModelResponse)
        response.reasoning = [reasoning_of(agent, info.index)]
        return response

    return function


def _two_agent_run() -> Harness:
    return harness(
        {
            MAIN.id: scripted(
                ModelResponse(
                    text="Je confie la recherche à deux agents.",
                    tool_calls=[
                        delegate(
                            task(INSTRUCTION_A, AGENT_A.id, ["kb:factures"]),
                            task(INSTRUCTION_B, AGENT_B.id, ["kb:contrats"]),
                        )
                    ],
                    reasoning=[MAIN_REASONING],
                ),
                reply(text="Zorglub paie en retard [fac-1] malgré un contrat à 30 jours [con-1]."),
            ),
            AGENT_A.id: reasoning_researcher("a"),
            AGENT_B.id: reasoning_researcher("b"),
        }
    )


async def test_every_agent_request_holds_only_its_instruction_and_scope() -> None:
    h = _two_agent_run()
    outcome = await h.run(QUESTION, history=HISTORY)

    assert outcome.status == "ok"
    assert [a.status for a in outcome.agents] == ["ok", "ok"]
    for own, other in ((AGENT_A.id, AGENT_B.id), (AGENT_B.id, AGENT_A.id)):
        requests = h.model(own).requests
        assert len(requests) == 3  # search, read, submit
        for request in requests:
            seen = request_text(request)
            assert SCOPES[own].instruction in seen
            assert SCOPES[own].kb in seen
            assert SCOPES[other].kb not in seen
            assert SCOPES[other].instruction not in seen
            for doc_id in SCOPES[other].ids:
                assert doc_id not in seen
            assert QUESTION not in seen
            assert "Zorglub ? Réponds avant vendredi" not in seen
            for earlier in HISTORY:
                assert earlier.content not in seen
            assert "séminaire" not in seen
            assert "Je confie la recherche" not in seen  # nor what the main model said
            assert "rs_main" not in seen and MAIN_REASONING.summary[0] not in seen  # nor how it reasoned
            assert f"rs_{'b' if own == AGENT_A.id else 'a'}_" not in seen  # nor how the other agent reasoned


async def test_reasoning_goes_back_within_its_own_loop_only() -> None:
    h = _two_agent_run()
    await h.run(QUESTION, history=HISTORY)

    # The main model's next request carries its reasoning, in its own turn; none of the agents'.
    second = h.main.requests[1]
    (turn,) = [m for m in second.messages if m.role == "assistant" and m.tool_calls]
    assert turn.reasoning == (MAIN_REASONING,)
    assert all(not r.id.startswith(("rs_a", "rs_b")) for m in second.messages for r in m.reasoning)
    # Each agent's every request carries each of its earlier turns' reasoning, in that turn.
    for own, name in ((AGENT_A.id, "a"), (AGENT_B.id, "b")):
        for n, request in enumerate(h.model(own).requests):
            turns = [m for m in request.messages if m.role == "assistant"]
            assert [m.reasoning for m in turns] == [(reasoning_of(name, i),) for i in range(n)]


async def test_first_agent_request_is_system_prompt_then_instruction_with_scope() -> None:
    h = _two_agent_run()
    await h.run(QUESTION, history=HISTORY)

    for model_id, scope in SCOPES.items():
        first = h.model(model_id).requests[0]
        assert [m.role for m in first.messages] == ["system", "user"]
        assert first.messages[0].content == AGENT_SYSTEM_PROMPT
        user = first.messages[1].content
        assert scope.instruction in user
        assert f"knowledge base {scope.kb}" in user
        assert {t.name for t in first.tools} == {"kb_search", "kb_read", "submit_result"}


async def test_agents_reports_reach_the_main_model_and_their_reads_count_as_sources() -> None:
    h = _two_agent_run()
    outcome = await h.run(QUESTION, history=HISTORY)

    second = h.main.requests[1]
    result = second.messages[-1]
    assert result.role == "tool"
    assert result.name == "agents"
    assert "Facture Zorglub mars 2024" in result.content
    assert "Contrat cadre Zorglub" in result.content
    # The main model's own conversation is untouched by the agents' work: only the tool result is added.
    assert [m.content for m in second.messages[1:4]] == [HISTORY[0].content, HISTORY[1].content, QUESTION]

    final = h.of(FinalEvent)[-1]
    assert final.text == outcome.text
    assert {s.id for s in final.sources} == {"fac-1", "fac-2", "con-1", "con-2"}
    finished = {e.model: e for e in h.of(AgentFinished)}
    assert {s.id for s in finished[AGENT_A.id].sources} == {"fac-1", "fac-2"}
    assert {s.id for s in finished[AGENT_B.id].sources} == {"con-1", "con-2"}
