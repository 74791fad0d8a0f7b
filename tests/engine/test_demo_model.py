"""The offline demo provider: a whole delegation, and a forced landing when the agents' budget is short."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

import pytest

from assistant.demo.model import DEMO_MODELS, DemoModel, Language, say
from assistant.engine.catalogue import Catalogue
from assistant.engine.events import AgentFinished, FinalEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.policy import DEFAULT_LEVELS, Policy
from assistant.engine.tools import Document
from tests.engine.engine_support import Harness, harness

# Each document in English and in French: each language's question reads its own.
KNOWLEDGE: dict[str, Iterable[Document]] = {
    "factures": [
        Document(
            "doc-1",
            "factures",
            "Invoice Bimbamjob 2024-03",
            "Bimbamjob invoice of March 2024: 12,400 EUR, paid late by 45 days.",
        ),
        Document("doc-2", "factures", "Invoice Acme 2024-01", "Acme invoice for January: 3,000 EUR, paid on time."),
        Document(
            "doc-11",
            "factures",
            "Facture Bimbamjob 2024-03",
            "Facture de Bimbamjob de mars 2024 : 12 400 EUR, payée avec 45 jours de retard.",
        ),
        Document("doc-12", "factures", "Facture Acme 2024-01", "Facture d’Acme : 3 000 EUR payés dans les délais."),
    ],
    "comptes-rendus": [
        Document(
            "doc-3",
            "comptes-rendus",
            "Bimbamjob meeting in June",
            "Meeting with Bimbamjob in June: they asked for a payment plan.",
        ),
        Document(
            "doc-13",
            "comptes-rendus",
            "Réunion Bimbamjob juin",
            "Réunion avec Bimbamjob en juin : ils ont demandé un échéancier de paiement.",
        ),
    ],
}
QUESTION = "Fiche complète sur Bimbamjob : facturation 2024, suivi, risque"
ENGLISH_QUESTION = "A full profile of Bimbamjob: their 2024 invoicing, the follow-up and the risk"
RESOURCES = ("kb:factures", "kb:comptes-rendus", "agents")


def demo(policy: Policy | None = None) -> Harness:
    return harness(
        {m.id: DemoModel(m) for m in DEMO_MODELS},
        catalogue=Catalogue(DEMO_MODELS),
        knowledge_backend=MemoryKnowledge(KNOWLEDGE),
        policy=policy,
    )


@pytest.mark.parametrize(("question", "language"), [(QUESTION, "fr"), (ENGLISH_QUESTION, "en")])
async def test_demo_delegates_one_agent_per_knowledge_base_and_cites_what_they_read(
    question: str, language: Language
) -> None:
    h = demo()
    outcome = await h.run(question, resources=RESOURCES, level="approfondi", model="demo-large")

    assert outcome.status == "ok"
    assert [a.status for a in outcome.agents] == ["ok", "ok"]
    assert {a.task.model.id for a in outcome.agents} == {"demo-small"}
    read = {a.task.resources: {s.id for s in a.sources} for a in outcome.agents}
    own = "doc-1" if language == "fr" else "doc-"  # the French documents are doc-11, doc-12 and doc-13
    assert read == {("kb:factures",): {f"{own}1", f"{own}2"}, ("kb:comptes-rendus",): {f"{own}3"}}
    assert f"[{own}1]" in outcome.text
    assert f"[{own}3]" in outcome.text
    assert outcome.text.endswith(say("footer", language))  # written in the question's language
    assert outcome.text.startswith(say("handing_kbs", language, count=2, model="demo-small"))
    for agent in outcome.agents:  # its base is its resource: the instruction does not name it by its slug
        assert agent.task.instruction.startswith(say("instruction_kb", language, words="").split(":")[0])
        assert agent.task.resources[0][3:] not in agent.task.instruction
    [final] = h.of(FinalEvent)
    assert {s.id for s in final.sources} == {f"{own}1", f"{own}2", f"{own}3"}


async def test_demo_agents_land_forced_and_come_back_interrupted_with_findings_when_rounds_are_short() -> None:
    levels = {**DEFAULT_LEVELS, "approfondi": dataclasses.replace(DEFAULT_LEVELS["approfondi"], agent_rounds=2)}
    h = demo(Policy(levels=levels))
    outcome = await h.run(QUESTION, resources=RESOURCES, level="approfondi", model="demo-large")

    assert outcome.status == "ok"
    assert [a.status for a in outcome.agents] == ["interrupted", "interrupted"]
    for agent in outcome.agents:
        assert agent.forced_landing
        assert agent.rounds == 2
        assert "round budget" in agent.reason
        assert agent.tools_run == ["kb_search"]  # it searched, then had to land before reading
        assert "Bimbamjob" in agent.report
        # The French documents' hits (doc-11 ...), none of the English ones.
        assert re.search(r"\[doc-1[123]\]", agent.report) and not re.search(r"\[doc-[123]\]", agent.report)
        assert say("gap_not_read", "fr") in agent.report  # the gap is said, not filled, in the question's language
    assert all(e.forced_landing for e in h.of(AgentFinished))
    assert say("agent_unfinished", "fr", reason=say("cause_rounds", "fr", used=2, limit=2)) in outcome.text
    assert "[doc-11]" in outcome.text


def test_a_possessive_names_its_owner_and_leaves_no_gap_about_it() -> None:
    """ "Bimbamjob's late payments": the demo searches for and reports about Bimbamjob, not "Bimbamjob's"."""
    from assistant.demo.model.words import keywords

    assert keywords("What are Bimbamjob's late payments?") == ["Bimbamjob", "late", "payments"]
    assert keywords("Que dit l'entreprise d'Orchidée ?") == ["dit", "l'entreprise", "d'Orchidée"]  # French: as before
