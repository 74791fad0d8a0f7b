"""Load the demo organisation, user and knowledge bases. Idempotent: running it twice changes nothing.

Each base holds its documents in English and in French (the same facts): a question in either language finds
the documents in its own.

The invoices base also holds a table: ``data/factures.csv``, a French export (``;``, decimal commas,
dd/mm/yyyy dates) of 2024's invoices, extracted as an upload is (``data_query`` reads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.management.base import BaseCommand
from django.db import transaction

from assistant.budgets.models import Category
from assistant.knowledge import processing
from assistant.knowledge.extract import extract
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs.models import Membership, Organisation

from .. import demo_features

DATA = Path(__file__).resolve().parents[2] / "data"
TABLES = {"factures": [DATA / "factures.csv"]}
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"

# The seed's split of a monthly total into task categories (slug, name, share); the first is the default.
DEMO_MONTHLY_TOKENS = 10_000_000
CATEGORIES = [
    ("catalogue", "Short catalogue questions", 40),
    ("syntheses", "Long multi-document syntheses", 45),
    ("administration", "Administration", 15),
]
# The demo's names in French (Translated): a French reader sees these, an English one the names above.
FRENCH_NAMES: dict[str, dict[str, str]] = {
    "catalogue": {"name": "Questions courtes sur le catalogue"},
    "syntheses": {"name": "Synthèses longues de plusieurs documents"},
    "administration": {"name": "Administration"},
    "factures": {
        "name": "Factures",
        "description": "Factures émises aux entreprises clientes, avec le suivi des paiements.",
    },
    "comptes-rendus": {
        "name": "Comptes rendus de réunion",
        "description": "Comptes rendus des réunions avec les entreprises clientes.",
    },
    "contrats": {"name": "Contrats", "description": "Contrats et avenants signés avec les entreprises clientes."},
}
TABLE_TITLE = "Factures 2024 (export CSV du logiciel de facturation)"
TABLE_WORDS = {"en": {"title": "Invoices 2024 (CSV export of the billing software)"}}
"""The table's document title, as its French export is named, and in English (Translated): the pages show the
reader's; the tools give the title as written."""

BASES: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "factures": (
        "Invoices",
        "Invoices issued to client companies, with payment follow-up.",
        [
            (
                "Invoice F-2024-031 — Bimbamjob",
                "Invoice F-2024-031 issued to Bimbamjob on 2024-02-05 for 18,400 EUR (annual platform licence). Due 2024-03-06. Paid on 2024-05-21, 76 days late, after two reminders.",
            ),
            (
                "Invoice F-2024-077 — Bimbamjob",
                "Invoice F-2024-077 issued to Bimbamjob on 2024-06-03 for 6,250 EUR (integration work, 25 days). Due 2024-07-03. Unpaid at 2024-12-31; a formal notice was sent on 2024-10-15.",
            ),
            (
                "Invoice F-2024-112 — Bimbamjob",
                "Invoice F-2024-112 issued to Bimbamjob on 2024-09-10 for 4,900 EUR (support, third quarter). Due 2024-10-10. Partially paid: 2,000 EUR received on 2024-11-28; 2,900 EUR outstanding.",
            ),
            (
                "Invoice F-2024-018 — Tamaris Conseil",
                "Invoice F-2024-018 issued to Tamaris Conseil on 2024-01-22 for 9,800 EUR (training, 4 sessions). Paid on 2024-02-12, on time.",
            ),
            (
                "Invoice F-2024-090 — Tamaris Conseil",
                "Invoice F-2024-090 issued to Tamaris Conseil on 2024-07-15 for 12,000 EUR (licence renewal). Paid on 2024-08-09, on time.",
            ),
            (
                "Invoice F-2024-045 — Orchidée Logistique",
                "Invoice F-2024-045 issued to Orchidée Logistique on 2024-03-18 for 22,500 EUR (route optimisation project, phase 1). Paid on 2024-04-30, 13 days late.",
            ),
            (
                "Invoice F-2024-133 — Orchidée Logistique",
                "Invoice F-2024-133 issued to Orchidée Logistique on 2024-11-04 for 15,000 EUR (phase 2). Due 2024-12-04. Paid on 2024-12-02.",
            ),
            (
                "Invoice F-2024-101 — Verdant Foods",
                "Invoice F-2024-101 issued to Verdant Foods on 2024-08-26 for 3,400 EUR (audit of data pipelines). Paid on 2024-09-20, on time.",
            ),
            (
                "Payment follow-up summary 2024",
                "Payment follow-up for 2024: Bimbamjob accounts for 9,150 EUR of the 9,150 EUR overdue at year end (invoices F-2024-077 and F-2024-112). Every other client paid within 15 days of the due date.",
            ),
        ],
    ),
    "comptes-rendus": (
        "Meeting reports",
        "Reports of meetings with client companies.",
        [
            (
                "Meeting report — Bimbamjob kick-off, 2024-01-18",
                "Kick-off with Bimbamjob (CEO Léa Martin, CTO Karim Haddad). Scope: platform licence and an integration with their HR software. Bimbamjob said its fundraising was delayed to the second half of 2024.",
            ),
            (
                "Meeting report — Bimbamjob steering committee, 2024-06-20",
                "Steering committee with Bimbamjob. The integration was delivered. Bimbamjob asked to pay invoice F-2024-077 in three instalments, citing cash-flow tension; no agreement was signed. Relationship described as cordial but tense on payments.",
            ),
            (
                "Meeting report — Bimbamjob review, 2024-11-07",
                "Quarterly review with Bimbamjob. Their new finance director announced a restructuring and a hiring freeze. They asked to reduce the support scope from 2025. Payment of the outstanding balance was promised before year end, without a date.",
            ),
            (
                "Meeting report — Tamaris Conseil, 2024-03-05",
                "Meeting with Tamaris Conseil about a second training cycle. Satisfaction survey: 4.6/5. They plan to extend the licence to two more departments in 2025.",
            ),
            (
                "Meeting report — Tamaris Conseil, 2024-10-14",
                "Follow-up with Tamaris Conseil: renewal signed for three years. No open issue.",
            ),
            (
                "Meeting report — Orchidée Logistique, 2024-02-27",
                "Kick-off with Orchidée Logistique for route optimisation. Budget approved for two phases. Contact: operations director Samuel Petit.",
            ),
            (
                "Meeting report — Orchidée Logistique, 2024-09-30",
                "Phase 1 results with Orchidée Logistique: 11% fewer kilometres driven. Phase 2 started. Late payment of phase 1 explained by an ERP migration on their side.",
            ),
            (
                "Meeting report — Verdant Foods, 2024-08-12",
                "Discovery meeting with Verdant Foods: audit of their data pipelines. Possible follow-up project in 2025 if the audit is conclusive.",
            ),
        ],
    ),
    "contrats": (
        "Contracts",
        "Contracts and amendments signed with client companies.",
        [
            (
                "Contract C-2024-004 — Bimbamjob",
                "Framework contract with Bimbamjob signed on 2024-01-25: platform licence 18,400 EUR per year, support billed quarterly, payment at 30 days. Late payment penalties: three times the legal interest rate. Termination with three months' notice.",
            ),
            (
                "Contract C-2024-002 — Tamaris Conseil",
                "Contract with Tamaris Conseil signed on 2024-01-10: licence and training. Renewed on 2024-10-14 for three years.",
            ),
            (
                "Contract C-2024-009 — Orchidée Logistique",
                "Contract with Orchidée Logistique signed on 2024-03-01 for a route optimisation project in two phases, 37,500 EUR in total.",
            ),
            (
                "Contract C-2024-015 — Verdant Foods",
                "Statement of work with Verdant Foods signed on 2024-08-20 for a data pipeline audit, 3,400 EUR fixed price.",
            ),
        ],
    ),
}

# The same documents in French: each language's question finds its own (the search matches words, and the demo
# model reads the hits in its language first). Same facts, same numbers.
FRENCH_DOCUMENTS: dict[str, list[tuple[str, str]]] = {
    "factures": [
        (
            "Facture F-2024-031 — Bimbamjob",
            "Facture F-2024-031 émise à Bimbamjob le 05/02/2024 pour 18 400 EUR (licence annuelle de la plateforme). Échéance le 06/03/2024. Payée le 21/05/2024, avec 76 jours de retard, après deux relances.",
        ),
        (
            "Facture F-2024-077 — Bimbamjob",
            "Facture F-2024-077 émise à Bimbamjob le 03/06/2024 pour 6 250 EUR (travaux d’intégration, 25 jours). Échéance le 03/07/2024. Impayée au 31/12/2024 ; une mise en demeure a été envoyée le 15/10/2024.",
        ),
        (
            "Facture F-2024-112 — Bimbamjob",
            "Facture F-2024-112 émise à Bimbamjob le 10/09/2024 pour 4 900 EUR (support du troisième trimestre). Échéance le 10/10/2024. Payée en partie : 2 000 EUR reçus le 28/11/2024 ; il reste 2 900 EUR dus.",
        ),
        (
            "Facture F-2024-018 — Tamaris Conseil",
            "Facture F-2024-018 émise à Tamaris Conseil le 22/01/2024 pour 9 800 EUR (formation, 4 sessions). Payée le 12/02/2024, dans les délais.",
        ),
        (
            "Facture F-2024-090 — Tamaris Conseil",
            "Facture F-2024-090 émise à Tamaris Conseil le 15/07/2024 pour 12 000 EUR (renouvellement de licence). Payée le 09/08/2024, dans les délais.",
        ),
        (
            "Facture F-2024-045 — Orchidée Logistique",
            "Facture F-2024-045 émise à Orchidée Logistique le 18/03/2024 pour 22 500 EUR (projet d’optimisation des tournées, phase 1). Payée le 30/04/2024, avec 13 jours de retard.",
        ),
        (
            "Facture F-2024-133 — Orchidée Logistique",
            "Facture F-2024-133 émise à Orchidée Logistique le 04/11/2024 pour 15 000 EUR (phase 2). Échéance le 04/12/2024. Payée le 02/12/2024.",
        ),
        (
            "Facture F-2024-101 — Verdant Foods",
            "Facture F-2024-101 émise à Verdant Foods le 26/08/2024 pour 3 400 EUR (audit des chaînes de données). Payée le 20/09/2024, dans les délais.",
        ),
        (
            "Suivi des paiements 2024",
            "Suivi des paiements de 2024 : Bimbamjob représente 9 150 EUR des 9 150 EUR en retard à la fin de l’année (factures F-2024-077 et F-2024-112). Tous les autres clients ont payé moins de 15 jours après l’échéance.",
        ),
    ],
    "comptes-rendus": [
        (
            "Compte rendu — lancement avec Bimbamjob, 18/01/2024",
            "Réunion de lancement avec Bimbamjob (Léa Martin, présidente, et Karim Haddad, directeur technique). Périmètre : licence de la plateforme et intégration avec leur logiciel de ressources humaines. Bimbamjob a annoncé que sa levée de fonds était reportée au second semestre 2024.",
        ),
        (
            "Compte rendu — comité de pilotage Bimbamjob, 20/06/2024",
            "Comité de pilotage avec Bimbamjob. L’intégration a été livrée. Bimbamjob a demandé à payer la facture F-2024-077 en trois fois, en invoquant des tensions de trésorerie ; aucun accord n’a été signé. Relation jugée cordiale mais tendue sur les paiements.",
        ),
        (
            "Compte rendu — revue Bimbamjob, 07/11/2024",
            "Revue trimestrielle avec Bimbamjob. Leur nouveau directeur financier a annoncé une restructuration et un gel des embauches. Ils ont demandé de réduire le périmètre du support à partir de 2025. Le paiement du solde dû a été promis avant la fin de l’année, sans date.",
        ),
        (
            "Compte rendu — Tamaris Conseil, 05/03/2024",
            "Réunion avec Tamaris Conseil sur un second cycle de formation. Enquête de satisfaction : 4,6/5. Ils prévoient d’étendre la licence à deux autres services en 2025.",
        ),
        (
            "Compte rendu — Tamaris Conseil, 14/10/2024",
            "Point de suivi avec Tamaris Conseil : renouvellement signé pour trois ans. Aucun sujet ouvert.",
        ),
        (
            "Compte rendu — Orchidée Logistique, 27/02/2024",
            "Lancement avec Orchidée Logistique pour l’optimisation des tournées. Budget approuvé pour deux phases. Contact : Samuel Petit, directeur des opérations.",
        ),
        (
            "Compte rendu — Orchidée Logistique, 30/09/2024",
            "Résultats de la phase 1 avec Orchidée Logistique : 11 % de kilomètres parcourus en moins. La phase 2 a commencé. Le retard de paiement de la phase 1 s’explique par une migration de leur progiciel de gestion.",
        ),
        (
            "Compte rendu — Verdant Foods, 12/08/2024",
            "Réunion de découverte avec Verdant Foods : audit de leurs chaînes de données. Projet de suite possible en 2025 si l’audit est concluant.",
        ),
    ],
    "contrats": [
        (
            "Contrat C-2024-004 — Bimbamjob",
            "Contrat-cadre avec Bimbamjob signé le 25/01/2024 : licence de la plateforme à 18 400 EUR par an, support facturé chaque trimestre, paiement à 30 jours. Pénalités de retard : trois fois le taux d’intérêt légal. Résiliation avec un préavis de trois mois.",
        ),
        (
            "Contrat C-2024-002 — Tamaris Conseil",
            "Contrat avec Tamaris Conseil signé le 10/01/2024 : licence et formation. Renouvelé le 14/10/2024 pour trois ans.",
        ),
        (
            "Contrat C-2024-009 — Orchidée Logistique",
            "Contrat avec Orchidée Logistique signé le 01/03/2024 pour un projet d’optimisation des tournées en deux phases, 37 500 EUR au total.",
        ),
        (
            "Contrat C-2024-015 — Verdant Foods",
            "Bon de commande avec Verdant Foods signé le 20/08/2024 pour un audit des chaînes de données, 3 400 EUR au forfait.",
        ),
    ],
}


class Command(BaseCommand):
    help = "Create the demo organisation, the demo user and the demo knowledge bases (idempotent)."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        org, _ = Organisation.objects.get_or_create(
            slug="demo", defaults={"name": "Demo Company", "time_zone": "Europe/Paris"}
        )
        User = get_user_model()
        user, created = User.objects.get_or_create(username=DEMO_USERNAME, defaults={"email": "demo@example.com"})
        if created or not user.check_password(DEMO_PASSWORD):
            user.set_password(DEMO_PASSWORD)
            user.save()
        Membership.objects.get_or_create(organisation=org, user=user, defaults={"role": "admin"})
        for slug, (name, description, documents) in BASES.items():
            kb, _ = KnowledgeBase.objects.update_or_create(
                organisation=org,
                slug=slug,
                defaults={"name": name, "description": description, "translations": {"fr": FRENCH_NAMES[slug]}},
            )
            for title, text in [*documents, *FRENCH_DOCUMENTS.get(slug, [])]:
                Document.objects.update_or_create(knowledge_base=kb, title=title, defaults={"text": text})
            for path in TABLES.get(slug, []):
                _add_table(kb, path)
        demo_features.load(org)  # the long reports and the Vérificateur profile (demo_features.py)
        # Created once: what an admin changes afterwards (budgets, the default) stays.
        has_default = Category.objects.filter(organisation=org, is_default=True).exists()
        for position, (slug, name, share) in enumerate(CATEGORIES):
            category, _ = Category.objects.get_or_create(
                organisation=org,
                slug=slug,
                defaults={
                    "name": name,
                    "monthly_tokens": DEMO_MONTHLY_TOKENS * share // 100,
                    "is_default": position == 0 and not has_default,
                    "position": position,
                    "translations": {"fr": FRENCH_NAMES[slug]},
                },
            )
            if category.name == name and not category.translations:  # loaded before categories had them
                category.translations = {"fr": FRENCH_NAMES[slug]}
                category.save(update_fields=["translations"])
        self.stdout.write(f"Demo data ready: organisation '{org.slug}', user '{DEMO_USERNAME}' / '{DEMO_PASSWORD}'.")


def _add_table(kb: KnowledgeBase, path: Path) -> None:
    """The file as an upload of the base, once: saved, then extracted here (the file is ours, no child needed)."""
    if Document.objects.filter(knowledge_base=kb, filename=path.name).exists():
        # Loaded before the table had its title (its file's name), then before its title had its English words.
        Document.objects.filter(knowledge_base=kb, filename=path.name, title__in=[path.stem, TABLE_TITLE]).update(
            title=TABLE_TITLE, translations=TABLE_WORDS
        )
        return
    data = path.read_bytes()
    doc = Document(
        knowledge_base=kb,
        title=TABLE_TITLE,
        translations=TABLE_WORDS,
        text="",
        filename=path.name,
        size=len(data),
        status=Document.PROCESSING,
    )
    doc.file.save(path.name, ContentFile(data), save=False)
    doc.save()
    processing.save_outcome(doc.pk, extract(path.name, data))
