"""The sentences of the demo's feature behaviours (``features.py`` and its modules), in English and French.

Merged into :data:`.texts.TEXTS`, so :func:`.texts.say` finds them like every other sentence of the demo;
kept apart so that the behaviours' sentences stay next to one another. Placeholders are ``str.format``
fields; what fills them (titles, ids, addresses, numbers, document text) is not translated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

FEATURE_TEXTS: Mapping[str, Mapping[Literal["en", "fr"], str]] = {
    # run_code: a computation over a base's table.
    "code_computing": {
        "en": "Let me compute this with a script over the tables of the knowledge bases chosen.",
        "fr": "Je calcule cela avec un script sur les tables des bases de connaissances choisies.",
    },
    "code_comment": {
        "en": "# Totals per client: the amounts of each table summed by its first text column",
        "fr": "# Totaux par client : les montants de chaque table, par sa 1re colonne de texte",
    },
    "code_totals": {
        "en": "Totals computed by a script over {title} [{id}]: {summed} summed by {group}, {rows} rows in all.",
        "fr": "Totaux calculés par un script sur {title} [{id}] : {summed} additionné par {group}, "
        "{rows} lignes en tout.",
    },
    "code_header": {"en": "| {group} | total | rows |", "fr": "| {group} | total | lignes |"},
    "code_no_table": {
        "en": "The script found no table in the documents of the knowledge bases chosen: there is nothing to total.",
        "fr": "Le script n’a trouvé aucune table dans les documents des bases de connaissances choisies : il n’y a "
        "rien à additionner.",
    },
    "code_failed": {
        "en": "The script did not give a result: {error}",
        "fr": "Le script n’a pas donné de résultat : {error}",
    },
    # web_search and web_fetch.
    "web_searching": {"en": "Let me search the web.", "fr": "Je cherche sur le web."},
    "web_reading": {"en": "Let me read the pages found.", "fr": "Je lis les pages trouvées."},
    "web_handing": {
        "en": "I am handing the web search to an agent running {model}.",
        "fr": "Je confie la recherche sur le web à un agent qui utilise {model}.",
    },
    "web_instruction": {
        "en": "Search the web for: {query}. Read the most relevant pages (web_fetch) and report what they say, "
        "with their addresses.",
        "fr": "Cherche sur le web : {query}. Lis les pages les plus pertinentes (web_fetch) et rapporte ce "
        "qu’elles disent, avec leur adresse.",
    },
    "web_answer": {
        "en": "Here is what the web pages say about {topic}.",
        "fr": "Voici ce que disent les pages web sur {topic}.",
    },
    "web_nothing": {
        "en": "The web search found no page about {topic}.",
        "fr": "La recherche sur le web n’a trouvé aucune page sur {topic}.",
    },
    "web_failed": {"en": "The web could not be read: {error}", "fr": "Le web n’a pas pu être lu : {error}"},
    "web_gap_unread": {
        "en": "the pages found were not read, only their summaries",
        "fr": "les pages trouvées n’ont pas été lues, seulement leurs résumés",
    },
    # An agent profile chosen for a check.
    "check_handing": {
        "en": "I am handing the check to an agent of the checking profile ({model}): it sees only the claim "
        "and the documents, not your question.",
        "fr": "Je confie la vérification à un agent du profil de vérification ({model}) : il ne voit que "
        "l’affirmation et les documents, pas votre question.",
    },
    "check_instruction": {
        "en": "Check in your knowledge bases whether the documents confirm: {claim}. Quote the sentences "
        "that confirm or contradict it, with their document ids, and say what they do not establish.",
        "fr": "Vérifie dans tes bases de connaissances si les documents confirment : {claim}. Cite les "
        "phrases qui le confirment ou le contredisent, avec l’identifiant de leur document, et dis ce qu’elles "
        "n’établissent pas.",
    },
    "check_claim": {"en": "The claim checked: {claim}", "fr": "L’affirmation vérifiée : {claim}"},
    "check_found": {
        "en": "Points of the claim the quoted sentences mention: {words}.",
        "fr": "Points de l’affirmation que citent les phrases relevées : {words}.",
    },
    "check_missing": {
        "en": "not established by the documents read: {word}",
        "fr": "non établi par les documents lus : {word}",
    },
    "check_profile_note": {
        "en": "_The check was done by an agent of the checking profile, which sees only the claim and the documents._",
        "fr": "_La vérification a été faite par un agent du profil de vérification, qui ne voit que l’affirmation "
        "et les documents._",
    },
    # A long document read in parts (kb_read's from_char).
    "whole_handing": {
        "en": "I am handing the reading of the whole document to {count} agents running {model}: a long "
        "document is read part after part.",
        "fr": "Je confie la lecture du document entier à {count} agents qui utilisent {model} : un long "
        "document se lit partie après partie.",
    },
    "whole_handing.one": {
        "en": "I am handing the reading of the whole document to {count} agent running {model}: a long "
        "document is read part after part.",
        "fr": "Je confie la lecture du document entier à {count} agent qui utilise {model} : un long "
        "document se lit partie après partie.",
    },
    "whole_instruction": {
        "en": "Read in full the document of your knowledge base about: {words}. A long document comes in parts: "
        "go on with kb_read's from_char until its end, and report what each part says, with the document id.",
        "fr": "Lis en entier le document de ta base de connaissances sur : {words}. Un long document arrive "
        "par parties : continue avec le from_char de kb_read jusqu’à la fin, et rapporte ce que dit chaque "
        "partie, avec l’identifiant du document.",
    },
    "whole_searching": {
        "en": "Let me find the document, then read it part after part.",
        "fr": "Je cherche le document, puis je le lis partie après partie.",
    },
    "whole_read": {
        "en": "I read {title} [{id}] in full, in {count} parts (characters {ranges}).",
        "fr": "J’ai lu {title} [{id}] en entier, en {count} parties (caractères {ranges}).",
    },
    "whole_read.one": {
        "en": "I read {title} [{id}] in full, in {count} part (characters {ranges}).",
        "fr": "J’ai lu {title} [{id}] en entier, en {count} partie (caractères {ranges}).",
    },
    "whole_read_partly": {
        "en": "I read {title} [{id}] up to character {end} of {length}, in {count} parts (characters {ranges}): "
        "the rest was not read.",
        "fr": "J’ai lu {title} [{id}] jusqu’au caractère {end} sur {length}, en {count} parties (caractères "
        "{ranges}) : la suite n’a pas été lue.",
    },
    "whole_read_partly.one": {
        "en": "I read {title} [{id}] up to character {end} of {length}, in {count} part (characters {ranges}): "
        "the rest was not read.",
        "fr": "J’ai lu {title} [{id}] jusqu’au caractère {end} sur {length}, en {count} partie (caractères "
        "{ranges}) : la suite n’a pas été lue.",
    },
    "whole_part": {"en": "**Characters {start}–{end}**", "fr": "**Caractères {start}–{end}**"},
    "whole_sections": {"en": "Sections: {sections}.", "fr": "Sections : {sections}."},
    "whole_gap": {
        "en": "{title} [{id}] was read up to character {end} of {length}; the rest is to be read with from_char={next}",
        "fr": "{title} [{id}] a été lu jusqu’au caractère {end} sur {length} ; la suite est à lire avec "
        "from_char={next}",
    },
    # An agent relaunched with a more precise instruction after an interrupted one.
    "relaunch_handing": {
        "en": "{Agent} came back interrupted after {rounds} rounds, before the end of {title}. I am relaunching an "
        "agent with a more precise instruction: read it from character {start}.",
        "fr": "{Agent} est revenu interrompu après {rounds} tours, avant la fin de {title}. Je relance un agent avec "
        "une consigne plus précise : le lire à partir du caractère {start}.",
    },
    "relaunch_instruction": {
        "en": "Read the document [{id}] ({title}) from character {at} to its end: kb_read with from_char={start}, "
        "then on if it is cut. Report what this part says, with the document id.",
        "fr": "Lis le document [{id}] ({title}) du caractère {at} jusqu’à la fin : kb_read avec "
        "from_char={start}, puis la suite s’il est coupé. Rapporte ce que dit cette partie, avec l’identifiant "
        "du document.",
    },
    "relaunch_note": {
        "en": "_{Agent} stopped at character {start} of {title}; {relaunched}, relaunched with a more precise "
        "instruction, read the rest._",
        "fr": "_{Agent} s’est arrêté au caractère {start} de {title} ; {relaunched}, relancé avec une consigne plus "
        "précise, a lu la suite._",
    },
}
