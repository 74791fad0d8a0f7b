"""The usage CSV: one line per run of an organisation's month (in its time zone), its text cells never read as
formulas by a spreadsheet (``csv_text``).

A month may hold tens of thousands of runs: it is read and written a few thousand lines at a time, each line's
figures summed from the run's saved usage as it stands (``line_figures``). Its download is built by a worker process
(``csv_export``), off the server's interpreter; built in the server's process (a test's transaction, the worker
failed), it leaves the interpreter to the other requests as it goes (``CSV_SHARE_*``).
"""

from __future__ import annotations

import csv
import io
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import date
from typing import Any

from django.db.models import CharField, Count
from django.db.models.functions import Cast

from assistant.orgs.models import Organisation
from assistant.runs.models import Run, Step
from assistant.runs.steps import agent_ends

from .months import month_bounds, zone

CSV_COLUMNS = [
    "started",
    "run",
    "user",
    "api_key",
    "category",
    "model",
    "level",
    "status",
    "agents",
    "forced_landings",
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "total_tokens",
    "cost_eur",
    "estimated_eur",
    "energy_wh",
    "carbon_g",
]


# A spreadsheet reads a cell starting with one of these as a formula (CSV injection), also after leading
# whitespace (" =1+1", "\n=1+1"), and a spreadsheet that splits on ";" (a French locale) reads each
# ";"-separated part as a cell of its own ("a;=1+1"). Such a part gets a leading apostrophe, which
# spreadsheets show as text and do not evaluate.
FORMULA_STARTS = ("=", "+", "-", "@")
CONTROL_STARTS = ("\t", "\r", "\n")


def _text_part(part: str) -> str:
    if part.startswith(CONTROL_STARTS) or part.lstrip().startswith(FORMULA_STARTS):
        return f"'{part}"
    return part


def csv_text(value: str) -> str:
    """A text cell of the CSV, never read as a formula by a spreadsheet, whichever separator it splits on."""
    return ";".join(_text_part(part) for part in value.split(";"))


def line_figures(usage: Any) -> tuple[int, int, int, int, int, float, float, float]:
    """A run's figures on its CSV line, from its saved usage (``Run.usage``, the JSON of ``RunUsage.as_dict``), as
    ``RunUsage.of`` reads them: calls, prompt, completion and cached tokens, all tokens, cost (EUR), energy (Wh)
    and carbon (g), each model's added in the same order and the same arithmetic, without building the objects (a
    month holds tens of thousands of lines). A usage without models (or not a usage) has zeros."""
    models = usage.get("by_model") if isinstance(usage, dict) else None
    calls = prompt = completion = cached = 0
    cost = energy_kwh = carbon = 0.0
    for m in models.values() if isinstance(models, dict) else ():
        if not isinstance(m, dict):
            continue
        calls += m.get("calls") or 0
        prompt += m.get("prompt_tokens") or 0
        completion += m.get("completion_tokens") or 0
        cached += m.get("cached_prompt_tokens") or 0
        cost += m.get("cost_eur") or 0.0
        energy_kwh += (m.get("energy_wh") or 0.0) / 1000
        carbon += m.get("carbon_g") or 0.0
    return calls, prompt, completion, cached, prompt + completion, cost, energy_kwh * 1000, carbon


def estimated_of(usage: Any) -> float:
    """The estimated part of a run's cost (EUR), from its saved usage: each model's ``estimated_eur``, as
    ``RunUsage.of`` reads them (0 for a usage saved before costs said their source)."""
    models = usage.get("by_model") if isinstance(usage, dict) else None
    return sum(
        m.get("estimated_eur") or 0.0
        for m in (models.values() if isinstance(models, dict) else ())
        if isinstance(m, dict)
    )


CSV_CHUNK = 2000
"""Lines the CSV reads from the database, and writes, at a time."""
CSV_SHARE_EVERY = 200
CSV_SHARE_SECONDS = 0.004
"""After so many lines, the CSV built in the server's process leaves the interpreter to the other requests for so long
(not in the worker, ``csv_export``, which has nobody to leave it to): its lines are
Python work that holds the interpreter (the GIL) the others' pages need, and a month's CSV takes about half a second of
it; so paced, their pages wait about half as much and the CSV takes about twice its time, still under a few seconds
for tens of thousands of runs."""


def _uuid_text(text: str) -> str:
    """A UUID as ``str(uuid)`` writes it, from the database's text of it (SQLite keeps 32 hex digits)."""
    if len(text) == 32:
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
    return text


def usage_csv_parts(org: Organisation, month: date, *, share: bool = True) -> Iterator[str]:
    """The usage CSV of the month (``usage_csv``), a few thousand lines at a time (``CSV_CHUNK``), its runs read
    from the database as they are written; ``share``: leaving the interpreter to the server's other requests as it
    goes (``CSV_SHARE_*``; not in a process of its own, ``csv_child``)."""
    tz = zone(org.time_zone)
    start, end = month_bounds(month, tz)
    # Each run's id as the text the CSV writes, cast by the database (a UUID object made for each line and written
    # out again was a third of the CSV's time).
    runs = (
        Run.objects.filter(organisation=org, created__gte=start, created__lt=end)
        .order_by("created")
        .annotate(id_text=Cast("pk", CharField()))
        .values_list(
            "created", "id_text", "user__username", "api_key__name", "category", "model", "level", "status", "usage"
        )
    )
    steps = Step.objects.filter(run__organisation=org, run__created__gte=start, run__created__lt=end)
    agents: dict[str, int] = {
        str(run_id): n
        for run_id, n in steps.filter(kind="agent_started")
        .order_by()
        .values("run_id")
        .annotate(n=Count("pk"))
        .values_list("run_id", "n")
    }
    landed: dict[str, int] = defaultdict(int)
    for agent in agent_ends(steps):
        landed[str(agent.run_id)] += agent.status == "interrupted" or agent.forced_landing
    texts: dict[str, str] = {}  # each text's cell, once: a month's lines repeat a few users, categories and models
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for n, (created, id_text, username, key_name, category, model, level, status, usage) in enumerate(
        runs.iterator(chunk_size=CSV_CHUNK), 1
    ):
        pk = _uuid_text(id_text)
        calls, prompt, completion, cached, tokens, cost, energy_wh, carbon = line_figures(usage)
        writer.writerow(
            (
                created.astimezone(tz).isoformat(timespec="seconds"),
                pk,
                # The texts someone chose (a user name, a category's slug, a model's id): never formulas.
                texts.get(username) or texts.setdefault(username, csv_text(username)),
                csv_text(key_name or ""),  # an API request counts against its key's spend limit
                texts.get(category) or texts.setdefault(category, csv_text(category)),
                texts.get(model) or texts.setdefault(model, csv_text(model)),
                texts.get(level) or texts.setdefault(level, csv_text(level)),
                texts.get(status) or texts.setdefault(status, csv_text(status)),
                agents.get(pk, 0),
                landed.get(pk, 0),
                calls,
                prompt,
                completion,
                cached,
                tokens,
                f"{cost:.6f}",
                f"{estimated_of(usage):.6f}",
                f"{energy_wh:.4f}",
                f"{carbon:.4f}",
            )
        )
        if share and n % CSV_SHARE_EVERY == 0:
            time.sleep(CSV_SHARE_SECONDS)
        if n % CSV_CHUNK == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    if out.tell():  # the last lines (or the header alone, in a month without runs)
        yield out.getvalue()


def usage_csv(org: Organisation, month: date) -> str:
    """One line per run of the month: who, which category, tokens, cost and carbon.

    A month may hold tens of thousands of runs: each is read as the few values its line needs (not a whole row with
    its answer and user), its figures summed from its saved usage as it stands (``line_figures``), its agents' ends
    from the few fields they need (``agent_ends``), and its steps found by the month's bounds in the query, not by a
    list of ids.
    """
    return "".join(usage_csv_parts(org, month))
