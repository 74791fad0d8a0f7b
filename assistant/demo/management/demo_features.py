"""What ``load_demo`` adds so that the demo shows every feature offline (the demo model's behaviours are in
``demo/model/features.py``):

- the knowledge base **rapports** (Reports) with the annual report 2024 in French and in English: long
  documents (about 20,000 characters, 4 parts of ``kb_read``), read part after part with ``from_char``,
  whose conclusions come last — too long for an agent at Approfondi's 5 rounds, which lands with what it
  read and is relaunched on the rest; an agent at Maximal's 10 rounds reads it all;
- the agent profile **Vérificateur**, which the demo's main model picks for a check ("check whether…" /
  «vérifie si…»).

Idempotent, like ``load_demo``: what an admin changed afterwards on the profile stays.
"""

from __future__ import annotations

from pathlib import Path

from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs.models import AgentProfile, Organisation

DATA = Path(__file__).resolve().parents[1] / "data"

REPORTS = "rapports"
REPORTS_BASE = ("Reports", "Annual and quarterly reports on the client portfolio.")
REPORTS_FRENCH = {"name": "Rapports", "description": "Rapports annuels et trimestriels sur le portefeuille clients."}
REPORT_FILES = ("annual-report-2024.en.txt", "rapport-annuel-2024.fr.txt")

CHECKER = "Vérificateur"
CHECKER_WORDS = {"en": {"name": "Checker"}}
"""The profile's name in English (Translated): the main model gives «Vérificateur», an English page shows Checker."""
CHECKER_INSTRUCTIONS = (
    "You check a claim against the documents of your scope, and nothing else. Quote the sentences that confirm or "
    "contradict it, each with its document id, and say plainly which points of the claim the documents do not "
    "establish. Never add what the documents do not say."
)


def report_documents() -> list[tuple[str, str]]:
    """(title, text) of each report: the title is the file's first line."""
    found = []
    for name in REPORT_FILES:
        text = (DATA / name).read_text(encoding="utf-8").strip()
        title = text.splitlines()[0].strip()
        found.append((title, text))
    return found


def load(org: Organisation) -> None:
    name, description = REPORTS_BASE
    kb, _ = KnowledgeBase.objects.update_or_create(
        organisation=org,
        slug=REPORTS,
        defaults={"name": name, "description": description, "translations": {"fr": REPORTS_FRENCH}},
    )
    for title, text in report_documents():
        Document.objects.update_or_create(knowledge_base=kb, title=title, defaults={"text": text})
    profile, _ = AgentProfile.objects.get_or_create(
        organisation=org,
        name=CHECKER,
        defaults={
            "instructions": CHECKER_INSTRUCTIONS,
            "default_model": "demo-small",
            "tools": ["kb"],
            "translations": CHECKER_WORDS,
        },
    )
    if not profile.translations:  # loaded before profiles had them
        profile.translations = CHECKER_WORDS
        profile.save(update_fields=["translations"])
