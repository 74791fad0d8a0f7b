"""Every sentence the demo model writes, in English and in French, keyed by a code.

The procedure never writes a sentence itself: it calls :func:`say` with a code and the language of the
question. A new behaviour adds its sentences here, under a code of its own, in both languages (the unit
tests check that every code has both, with the same placeholders). Placeholders are ``str.format``
fields; what fills them (document text, ids, table rows) is not translated.

What the product itself words (statuses, reasons, the tools' refusals) does not come through here: the
UI words those in the reader's language.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from .feature_texts import FEATURE_TEXTS

Language = Literal["en", "fr"]
LANGUAGES: tuple[Language, ...] = ("en", "fr")

TEXTS: Mapping[str, Mapping[Language, str]] = {
    **FEATURE_TEXTS,  # the feature behaviours' (features.py)
    # The main model's reasoning summary of a round (demo-large reasons), before that round's text or calls.
    "thinking_agents": {
        "en": "The question spans several resources: searching each through its own agent, in parallel, is faster "
        "than one after the other. Each agent reports the facts with their document ids.",
        "fr": "La question porte sur plusieurs ressources : les faire chercher chacune par son agent, en parallèle, "
        "va plus vite que l’une après l’autre. Chaque agent rapporte les faits avec l’identifiant de leur document.",
    },
    "thinking_tools": {
        "en": "Before answering I need what the documents say: I look it up with my tools first.",
        "fr": "Avant de répondre, il me faut ce que disent les documents : je les cherche d’abord avec mes outils.",
    },
    "thinking_answer": {
        "en": "I have what I need: I answer from what was read, citing each document.",
        "fr": "J’ai ce qu’il me faut : je réponds à partir de ce qui a été lu, en citant chaque document.",
    },
    # Said by the main model.
    "footer": {
        "en": "_Written by the offline demo model, which assembles what was read; no language model was used._",
        "fr": "_Écrit par le modèle de démonstration hors ligne, qui assemble ce qu’il a lu ; aucun modèle "
        "de langage n’a été utilisé._",
    },
    "handing_kbs": {
        "en": "I am handing the search of {count} knowledge bases to agents running {model}, in parallel.",
        "fr": "Je confie la recherche dans {count} bases de connaissances à des agents qui utilisent {model}, "
        "en parallèle.",
    },
    "handing_kbs.one": {
        "en": "I am handing the search of {count} knowledge base to an agent running {model}.",
        "fr": "Je confie la recherche dans {count} base de connaissances à un agent qui utilise {model}.",
    },
    "handing_resources": {
        "en": "I am handing the search of {count} resources to agents running {model}, in parallel.",
        "fr": "Je confie la recherche dans {count} ressources à des agents qui utilisent {model}, en parallèle.",
    },
    "handing_resources.one": {
        "en": "I am handing the search of {count} resource to an agent running {model}.",
        "fr": "Je confie la recherche dans {count} ressource à un agent qui utilise {model}.",
    },
    "instruction_kb": {
        "en": "Find in your knowledge base what the documents say about: {words}. "
        "Read the relevant documents and report the facts with their document ids.",
        "fr": "Cherche dans ta base de connaissances ce que disent les documents sur : {words}. "
        "Lis les documents pertinents et rapporte les faits avec l’identifiant de leur document.",
    },
    "instruction_connector": {
        "en": "Ask the connector {connector} what it has about: {words}. "
        "Report what it returns, with the connector as the source.",
        "fr": "Demande au connecteur {connector} ce qu’il a sur : {words}. "
        "Rapporte ce qu’il renvoie, avec le connecteur comme source.",
    },
    "searching_kbs": {
        "en": "Let me search the knowledge bases.",
        "fr": "Je cherche dans les bases de connaissances.",
    },
    "asking_connectors": {
        "en": "Let me ask the connectors.",
        "fr": "J’interroge les connecteurs.",
    },
    "answer_connectors": {
        "en": "Here is what the connectors returned.",
        "fr": "Voici ce que les connecteurs ont renvoyé.",
    },
    "answer_nothing_found": {
        "en": "I found no document matching your question in the knowledge bases.",
        "fr": "Je n’ai trouvé aucun document qui réponde à votre question dans les bases de connaissances.",
    },
    "answer_no_resources": {
        "en": "This is the offline demo model. It does not understand language, so it cannot discuss {topic}. "
        "Enable one or more knowledge bases (and agents, at the Approfondi or Maximal level) and it will "
        "search them, read documents and write an answer citing them.",
        "fr": "Ceci est le modèle de démonstration hors ligne. Il ne comprend pas le langage, il ne peut donc pas "
        "parler de {topic}. Activez une ou plusieurs bases de connaissances (et les agents, au niveau Approfondi "
        "ou Maximal) : il y cherchera, lira des documents et écrira une réponse qui les cite.",
    },
    "topic_your_message": {"en": "your message", "fr": "votre message"},
    "answer_intro": {
        "en": "Here is what the documents say about {topic}.",
        "fr": "Voici ce que disent les documents sur {topic}.",
    },
    "topic_your_question": {"en": "your question", "fr": "votre question"},
    "task_refused": {"en": "**A task was refused:** {error}", "fr": "**Une tâche a été refusée :** {error}"},
    "from_agent": {"en": "**From {agent}**", "fr": "**Selon l’{agent}**"},
    "agent_unfinished": {
        "en": "_This agent did not finish ({reason}): its findings are partial, and I am not filling the gaps._",
        "fr": "_Cet agent n’a pas terminé ({reason}) : ses constats sont partiels, et je ne comble pas les lacunes._",
    },
    "no_reason": {"en": "no reason given", "fr": "aucune raison donnée"},
    "agent_gaps": {"en": "Gaps: {gaps}", "fr": "Lacunes : {gaps}"},
    "agent_partial_read": {
        "en": "It wrote no report; it had read: {documents}.",
        "fr": "Il n’a pas écrit de rapport ; il avait lu : {documents}.",
    },
    "agent_partial_nothing": {
        "en": "It wrote no report and had read nothing.",
        "fr": "Il n’a pas écrit de rapport et n’avait rien lu.",
    },
    # Why an agent did not finish (the cause the agents tool returns, as data), in the demo's words.
    "cause_rounds": {
        "en": "its round budget was reached, {used}/{limit} rounds",
        "fr": "son budget de tours est atteint, {used}/{limit} tours",
    },
    "cause_tokens": {"en": "its token budget was reached", "fr": "son budget de jetons est atteint"},
    "cause_seconds": {"en": "its time budget was reached", "fr": "son budget de temps est atteint"},
    "cause_output_cut": {
        "en": "its output was cut at the token cap",
        "fr": "sa sortie a été coupée au plafond de jetons",
    },
    "cause_model_error": {"en": "its model call failed", "fr": "l’appel à son modèle a échoué"},
    "cause_stopped_by_user": {"en": "it was stopped on request", "fr": "il a été arrêté à la demande"},
    "cause_category_budget": {
        "en": "the category's monthly budget is reached",
        "fr": "le budget mensuel de la catégorie est atteint",
    },
    "cause_other_interrupted": {"en": "it was interrupted", "fr": "il a été interrompu"},
    "cause_other_stopped": {"en": "it was stopped", "fr": "il a été arrêté"},
    "cause_other_error": {"en": "it failed", "fr": "il a échoué"},
    "from_tables": {
        "en": "**From the tables** ({rows}):\n\n{table}",
        "fr": "**D’après les tables** ({rows}) :\n\n{table}",
    },
    # Said by the agents, in their reports.
    "query_rows": {"en": "{count} rows", "fr": "{count} lignes"},
    "sql_rows": {"en": "rows", "fr": "lignes"},  # the name of the demo query's count column
    "query_result": {"en": "{rows}:\n\n{table}", "fr": "{rows} :\n\n{table}"},
    "query_gave": {"en": "The query `{sql}` gave {result}", "fr": "La requête `{sql}` a donné {result}"},
    "nothing_in_scope": {
        "en": "Nothing relevant was found in my scope.",
        "fr": "Rien de pertinent n’a été trouvé dans mon périmètre.",
    },
    "gap_word": {"en": "nothing found about '{word}'", "fr": "rien trouvé sur « {word} »"},
    "gap_not_read": {
        "en": "documents were not read, only search results",
        "fr": "les documents n’ont pas été lus, seulement les résultats de recherche",
    },
    # The error a ``#demo-fail`` agent's model call raises (an unreachable provider, on purpose).
    "failure": {
        "en": "the offline demo model fails here on purpose (the question asked for it with #demo-fail)",
        "fr": "le modèle de démonstration hors ligne échoue ici exprès (la question l’a demandé avec #demo-fail)",
    },
}


def say(code: str, language: Language, **values: object) -> str:
    """The sentence ``code`` in ``language``, its placeholders filled. A sentence with a ``count`` has its
    singular under ``<code>.one``, taken by the language's rule (1 in English; 0 and 1 in French)."""
    count = values.get("count")
    if isinstance(count, int) and (count == 1 if language == "en" else count <= 1) and f"{code}.one" in TEXTS:
        code = f"{code}.one"
    return TEXTS[code][language].format(**values)


def agent_words(agent_id: str) -> str:
    """An agent's id as a reader says it: ``agent-1`` → "agent 1"."""
    return agent_id.replace("-", " ")
