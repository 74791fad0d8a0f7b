"""Each request that can take seconds, and another user's pages meanwhile."""

from __future__ import annotations

import datetime
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ..others import Pages, Served, load, p95, serve
from ..registry import Result, below, benchmark
from .whole_server import _postgres, fresh_database

BASELINE_SECONDS = 8.0
TIMES = 8  # each request sent this many times (a base's deletion: once for each base), one at a time
MIN_PAGES = 60  # and again, up to MOST_TIMES, until this many pages ran beside it: a p95 over 8 pages is their worst
MOST_TIMES = 40
PAUSE = 1.0  # seconds between two of them: each request's own effect, not a user sending them back to back
ONLY = [w for w in os.environ.get("BENCH_LONG_REQUESTS", "").split(",") if w]
"""Words of the requests to measure (``BENCH_LONG_REQUESTS=CSV,document``: the usage CSV and the document's page);
every request when unset."""
RUNS_IN_MONTH = 20_000
TURNS = 400
DOCUMENT_CHARS = 5_000_000
BASE_DOCUMENTS = 2_000
SEED = f"""
import random
from django.db import connection
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.runs.models import Conversation, Message, Run
from assistant.budgets.models import Category
demo = Organisation.objects.get(slug="demo")
user = get_user_model().objects.get(username="demo")
rng = random.Random(3)
words = "invoice payment reminder contract delay client amount quarter report meeting".split()
def text(n):
    return " ".join(rng.choice(words) for _ in range(n // 7))
# A large month: {RUNS_IN_MONTH} runs in 100 conversations.
talks = Conversation.objects.bulk_create(
    [Conversation(organisation=demo, user=user, title=f"Month {{i}}") for i in range(100)]
)
# Each run's usage as a run saves it (RunUsage.as_dict): two models, their calls, tokens, cost and carbon.
from assistant.engine.types import UsagePart
from assistant.engine.usage import Impact, RunUsage
spent = RunUsage()
for name, calls in (("demo-large", 2), ("demo-small", 4)):
    for _ in range(calls):
        spent.add(name, UsagePart(prompt_tokens=2100, completion_tokens=330, cached_prompt_tokens=600), 0.0021,
                  Impact(0.00021, 0.012))
usage = spent.as_dict()
Run.objects.bulk_create(
    [
        Run(conversation=talks[i % 100], organisation=demo, user=user, model="demo-large", level="approfondi",
            category="syntheses", status="ok", answer="Done.", usage=usage, cost_eur=0.01)
        for i in range({RUNS_IN_MONTH})
    ],
    batch_size=2000,
)
# A long conversation: {TURNS} turns, each a question and a 4,000-character answer.
long = Conversation.objects.create(organisation=demo, user=user, title="Long conversation")
runs = Run.objects.bulk_create(
    [
        Run(conversation=long, organisation=demo, user=user, model="demo-large", level="approfondi",
            category="syntheses", status="ok", answer=text(4000), usage=usage, cost_eur=0.01)
        for _ in range({TURNS})
    ]
)
Message.objects.bulk_create(
    [m for r in runs for m in (Message(conversation=long, role="user", content=text(300), run=r),
                               Message(conversation=long, role="assistant", content=r.answer, run=r))]
)
# A large document ({DOCUMENT_CHARS:,} characters) and three bases of {BASE_DOCUMENTS:,} documents to delete.
factures = KnowledgeBase.objects.get(organisation=demo, slug="factures")
big = Document.objects.create(knowledge_base=factures, title="Large report", text=text({DOCUMENT_CHARS}))
for n in range(3):
    kb = KnowledgeBase.objects.create(organisation=demo, slug=f"archive-{{n}}", name=f"Archive {{n}}")
    Document.objects.bulk_create(
        [Document(knowledge_base=kb, title=f"Note {{i}}", text=text(3000)) for i in range({BASE_DOCUMENTS})],
        batch_size=500,
    )
category = Category.objects.filter(organisation=demo).order_by("pk").first()
import os
with open(os.path.join(os.path.dirname(os.environ["SQLITE_PATH"]), "ids"), "w") as f:
    f.write(f"{{long.pk}} {{big.pk}} {{category.pk}}")
"""


def _ids(served: Served) -> tuple[int, int, int]:
    """The long conversation's, the large document's and a category's ids, as the seed wrote them."""
    conversation, document, category = (int(x) for x in (served.folder / "ids").read_text().split())
    return conversation, document, category


def _measure(
    pages: Pages,
    name: str,
    work: Callable[[], Any],
    baseline: list[float],
    context: str,
    times: int = TIMES,
    most: int = MOST_TIMES,
) -> Result:
    """``work`` sent ``times`` times, PAUSE apart, then again until MIN_PAGES pages ran beside it (``most`` times in
    all); the other user's pages requested while one of them ran."""
    durations: list[float] = []
    during: list[float] = []
    while len(durations) < times or (len(during) < MIN_PAGES and len(durations) < most):
        pages_then, took = pages.during(work)
        during += pages_then
        durations.append(took)
        time.sleep(PAUSE)
    return Result(
        name=f"Another user's page during {name}, p95",
        figure=p95(during),
        unit="ms",
        digits=0,
        target=below(200),
        notes=f"{len(during)} pages, worst {max(during, default=0):.0f} ms (baseline p95 {p95(baseline):.0f} ms); "
        f"the request took {min(durations):.2f}–{max(durations):.2f} s ({len(durations)} times, {PAUSE:g} s apart); "
        f"{context}",
    )


def _checked(response: Any, status: int = 200) -> Any:
    if response.status_code != status:
        raise RuntimeError(f"{response.request.url} answered {response.status_code}")
    return response


@benchmark("Requests that take seconds, and another user's pages", order=75)
def long_requests() -> list[Result]:
    """The server as in the uploads' benchmark (`manage.py runserver`, Daphne, SQLite in a temporary folder),
    seeded with a large month (20,000 runs), a conversation of 400 turns (4,000-character answers), a
    document of 5 million characters and three bases of 2,000 documents. The demo admin sends each long
    request 8 times, one at a time, 1 s apart, and again until 60 of the other user's pages ran beside it (40 times at
    most; a base's deletion: once for each base), while a member of
    another organisation loads the chat page and the knowledge bases page in a loop, 50 ms apart, from a client
    process of its own; the p95 is over the pages whose time overlapped one of the long requests:
    the usage CSV of the month (`/settings/usage.csv`), the conversation's export (`export.json` and
    `export.md`), the document's page (`/documents/<id>/`), a base's deletion (`POST /kb/<slug>/delete`). On
    PostgreSQL (`BENCH_POSTGRES`, a new database, a server of its own with the same seed): budget raises sent by four
    threads of the admin at once, as often, with that server's own baseline (a row says so when no PostgreSQL
    answered). Baseline: the same pages for 8 s before, in the same server. The load
    average (`uptime`) is in each row's notes: the machine is shared with other developers' work."""
    rows: list[Result] = []
    month = datetime.date.today().strftime("%Y-%m")
    bases = iter(range(3))
    # The server's names (served, demo, conversation, document) are bound below, before any case is sent.
    cases: list[tuple[str, Callable[[], Any], int]] = [
        (
            "the usage CSV of a month of 20,000 runs",
            lambda: _checked(demo.get(f"/settings/usage.csv?month={month}")),
            TIMES,
        ),
        (
            "a 400-turn conversation's JSON export",
            lambda: _checked(demo.get(f"/c/{conversation}/export.json")),
            TIMES,
        ),
        (
            "a 400-turn conversation's Markdown export",
            lambda: _checked(demo.get(f"/c/{conversation}/export.md")),
            TIMES,
        ),
        ("a 5-million-character document's page", lambda: _checked(demo.get(f"/documents/{document}/")), TIMES),
        # A base is deleted once: there are three.
        (
            "a base of 2,000 documents deleted",
            lambda: _checked(served.post(demo, f"/kb/archive-{next(bases)}/delete"), 302),
            3,
        ),
    ]
    cases = [c for c in cases if not ONLY or any(word in c[0] for word in ONLY)]
    if cases:  # else only the raises on PostgreSQL were asked for
        with serve(SEED) as served:
            conversation, document, _category = _ids(served)
            demo = served.client("demo", "demo-password")
            pages = Pages(served.url)
            pages.start()
            try:
                baseline = pages.baseline(BASELINE_SECONDS)
                rows.append(
                    Result(
                        name="Another user's page alone, p95",
                        figure=p95(baseline),
                        unit="ms",
                        digits=0,
                        notes=f"{len(baseline)} pages; load average {load()}",
                    )
                )
                for name, work, times in cases:
                    most = times if times < TIMES else MOST_TIMES
                    rows.append(_measure(pages, name, work, baseline, f"load average {load()}", times, most))
            finally:
                pages.stop()
    if not ONLY or any(word in "budget raises" for word in ONLY):
        pg = _postgres()
        if pg:
            rows += _raises_on_postgresql(pg)
        else:
            rows.append(
                Result(
                    name="Another user's page during budget raises, four at once (PostgreSQL), p95",
                    figure=float("nan"),
                    unit="ms",
                    notes="not measured: no PostgreSQL answered at BENCH_POSTGRES (default 127.0.0.1:5432)",
                )
            )
    return rows


def _raises_on_postgresql(pg: str) -> list[Result]:
    """The other user's pages alone and during the raises, in a server of its own on PostgreSQL."""
    with fresh_database(pg, "_raises") as url, serve(SEED, {"DATABASE_URL": url}) as served:
        _conversation, _document, category = _ids(served)
        admins = [served.client("demo", "demo-password") for _ in range(4)]
        pages = Pages(served.url)
        pages.start()
        try:
            baseline = pages.baseline(BASELINE_SECONDS)
            until = (datetime.date.today() + datetime.timedelta(days=3)).isoformat()

            def four_raises() -> None:
                def one(client: Any) -> None:
                    data = {"raise-category": str(category), "raise-tokens": "1000", "raise-ends_on": until}
                    _checked(
                        served.post(client, "/settings/budgets/raises", data={**data, "raise-reason": "bench"}), 302
                    )

                threads = [threading.Thread(target=one, args=(c,)) for c in admins]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()

            alone = Result(
                name="Another user's page alone (PostgreSQL), p95",
                figure=p95(baseline),
                unit="ms",
                digits=0,
                notes=f"{len(baseline)} pages; load average {load()}",
            )
            during = _measure(
                pages, "budget raises, four at once (PostgreSQL)", four_raises, baseline, f"load average {load()}"
            )
            return [alone, during]
        finally:
            pages.stop()
