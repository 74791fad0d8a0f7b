"""Which language a question is in, French or English, deterministically (the demo does not understand language).

Each language's function words are counted (words neither language shares: ``a``, ``on``, ``me`` count for
neither), and every lowercase word with a French accent counts for French (a capitalised one may be a name,
«Orchidée Logistique», in an English question). The higher count wins; a tie (a bare name,
a number, an empty message) is *unsure* and the caller falls back to the interface language.
"""

from __future__ import annotations

import re

from .texts import LANGUAGES, Language

_ENGLISH = frozenset(
    """the and of to is are was were be been this that these those what which who whom whose when where why how
    with without from for about into over under than then there their they them it its i you your we our us
    he she his her not no yes do does did have has had will would can could should shall may might must
    please tell give show find list all any some each every many much more most other such only also
    just very out up down if or but so because while after before between during by at an""".split()
)
_FRENCH = frozenset(
    """le la les un une des du de et est sont été être ou où que qui quoi quel quelle quels quelles lequel
    laquelle pour par sur sous dans avec sans au aux ce cet cette ces se sa ses leur leurs nous vous il
    elle ils elles je tu ne pas plus moins très aussi mais donc car comment pourquoi quand combien tout tous
    toute toutes chez depuis entre vers selon dont ont avons avez fait faire dis dire donne donner montre
    cherche trouve liste résume quelque chaque autre autres notre nos votre vos mon ma mes ton ta tes
    y en c d l j qu""".split()
)
_ACCENTED = re.compile(r"[àâäçéèêëîïôöùûüÿœæ]", re.IGNORECASE)
_WORDS = re.compile(r"\w+")


def scores(text: str) -> dict[Language, int]:
    """Each language's count of evidence in ``text``."""
    found = _WORDS.findall(text)
    words = [w.lower() for w in found]
    return {
        "en": sum(w in _ENGLISH for w in words),
        "fr": sum(w in _FRENCH for w in words) + sum(w.islower() and bool(_ACCENTED.search(w)) for w in found),
    }


def detect(text: str) -> Language | None:
    """The language ``text`` is in, or None when unsure (no evidence, or as much for each)."""
    counted = scores(text)
    best = max(LANGUAGES, key=lambda lang: counted[lang])
    if all(counted[lang] == counted[best] for lang in LANGUAGES):
        return None
    return best


def language_of(text: str, fallback: Language) -> Language:
    """The language of ``text``, else ``fallback`` (the interface language)."""
    return detect(text) or fallback


def interface_language(code: str | None) -> Language:
    """The demo's language for an interface language code (``fr``, ``fr-ca``: French; anything else: English)."""
    primary = (code or "").lower().replace("_", "-").split("-")[0]
    return next((lang for lang in LANGUAGES if lang == primary), "en")
