"""The offline demo provider: no key, no network, deterministic, and honest about what it is.

It does not understand language. It follows a fixed procedure that exercises every feature: with
the ``agents`` tool it delegates one agent per knowledge base in parallel; its agents search, read
several documents in one turn and end through ``submit_result`` (or land when forced); without
agents it searches and reads itself; when its knowledge bases hold tables (``data_query`` is offered),
it totals the first numeric column of the first table by its first text column, in the round where it
reads; it then writes an answer citing what was read. Text streams word by word at a configurable pace
so live progress can be watched.

The package:

- :mod:`.info` — the demo models' catalogue entries (prices, limits, carbon parameters);
- :mod:`.texts` — every sentence the demo writes, keyed by code, in English and French;
- :mod:`.language` — which language a question is in (the interface language when unsure);
- :mod:`.markers` — ``#demo-rounds=N`` and ``#demo-fail``, to show an agent's other outcomes offline;
- :mod:`.words` — a question's content words, a document's sentences that mention them;
- :mod:`.reading` — what a request offers (tools, enums) and what the tools called returned;
- :mod:`.numbers` — numbers as the demo writes them for a person, in its language's format;
- :mod:`.procedure` — the main model's and the agents' procedure, one :class:`~.procedure.Step` per call;
  new behaviours are modules of their own, called from the places it marks;
- :mod:`.model` — :class:`DemoModel`, which streams the procedure's response with its usage.
"""

from __future__ import annotations

from .info import CARBON_AS, DEMO_MODELS
from .markers import DEMO_FAIL, DEMO_ROUNDS
from .model import DemoModel
from .texts import LANGUAGES, TEXTS, Language, say
from .words import keywords

DEMO_FOOTER = TEXTS["footer"]["en"]
DEMO_FAILURE = TEXTS["failure"]["en"]

__all__ = [
    "CARBON_AS",
    "DEMO_FAIL",
    "DEMO_FAILURE",
    "DEMO_FOOTER",
    "DEMO_MODELS",
    "DEMO_ROUNDS",
    "LANGUAGES",
    "TEXTS",
    "DemoModel",
    "Language",
    "keywords",
    "say",
]
