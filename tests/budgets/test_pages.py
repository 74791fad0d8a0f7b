"""The admins' budgets and usage pages: categories, raises (admins only, who and when recorded), the
time zone, the usage page and its CSV; members get 403, and another organisation's data never shows."""

from __future__ import annotations

import csv
import html
import io
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from assistant.budgets import months, services, state
from assistant.budgets.models import BudgetRaise, Category
from assistant.orgs.models import Organisation
from assistant.runs.models import Conversation, Run
from tests.budgets.budgets_support import World, signed_in, use

PAGES = ["/settings/budgets/", "/settings/usage/", "/settings/usage.csv"]


def _categories_post(world: World, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {"default": world.catalogue.pk}
    for c in Category.objects.filter(organisation=world.demo):
        data |= {
            f"c{c.pk}-name": c.name,
            f"c{c.pk}-monthly_tokens": c.monthly_tokens,
            f"c{c.pk}-alert_thresholds": "80, 100",
        }
    return data | changes


def _run(org: Organisation, category: str, tokens: int, cost: float) -> Run:
    user = get_user_model().objects.filter(memberships__organisation=org).first()
    assert user is not None
    conv = Conversation.objects.create(organisation=org, user=user, title="t")
    usage = {
        "cost_eur": cost,
        "total_tokens": tokens,
        "carbon_g": 0.5,
        "energy_wh": 1.0,
        "carbon_estimated": True,
        "by_model": {
            "mistral-small": {
                "calls": 2,
                "prompt_tokens": tokens - 100,
                "completion_tokens": 100,
                "cached_prompt_tokens": 0,
                "cost_eur": cost,
                "energy_wh": 1.0,
                "carbon_g": 0.5,
            }
        },
    }
    return Run.objects.create(
        conversation=conv,
        organisation=org,
        user=user,
        model="mistral-small",
        category=category,
        status="ok",
        usage=usage,
        cost_eur=cost,
    )


def test_only_admins_reach_the_pages(world: World) -> None:
    for url in PAGES:
        assert signed_in("demo").get(url).status_code == 200
        assert signed_in("mia").get(url).status_code == 403
    assert signed_in("mia").post("/settings/budgets/categories", _categories_post(world)).status_code == 403
    assert signed_in("mia").post("/settings/budgets/time-zone", {"zone-time_zone": "UTC"}).status_code == 403


def test_the_budgets_page_shows_each_category_and_its_month(world: World) -> None:
    use(world.syntheses, 450_000)
    page = html.unescape(signed_in("demo").get("/settings/budgets/").content.decode())
    for name in ("Short catalogue questions", "Long multi-document syntheses", "Administration"):
        assert name in page
    assert "450,000 of 4,500,000 (10 %)" in page
    assert "Obsidian" not in page  # the other organisation's category


def test_an_admin_edits_budgets_and_the_default(world: World) -> None:
    client = signed_in("demo")
    data = _categories_post(
        world, default=world.syntheses.pk, **{f"c{world.administration.pk}-monthly_tokens": 2_000_000}
    )
    assert client.post("/settings/budgets/categories", data).status_code == 302
    world.administration.refresh_from_db()
    assert world.administration.monthly_tokens == 2_000_000
    classified = services.classify(world.demo)
    assert classified is not None and classified.slug == "syntheses"
    # Thresholds must be percentages; a refused form keeps the page, with status 422.
    bad = _categories_post(world, **{f"c{world.catalogue.pk}-alert_thresholds": "80, 150"})
    assert client.post("/settings/budgets/categories", bad).status_code == 422


def test_at_most_four_categories(world: World) -> None:
    client = signed_in("demo")
    new = {
        "new-name": "Scheduled reports",
        "new-slug": "reports",
        "new-monthly_tokens": 500_000,
        "new-alert_thresholds": "80, 100",
    }
    assert client.post("/settings/budgets/categories/new", new).status_code == 302
    assert Category.objects.get(organisation=world.demo, slug="reports").is_default is False
    again = {**new, "new-slug": "more"}
    assert client.post("/settings/budgets/categories/new", again).status_code == 422
    assert Category.objects.filter(organisation=world.demo).count() == 4
    # The other organisation's slugs do not collide with this one's.
    assert (
        signed_in("mallory").post("/settings/budgets/categories/new", {**new, "new-slug": "catalogue"}).status_code
        == 302
    )


def test_a_raise_by_an_admin_is_recorded_and_unblocks_the_category_until_its_end_date(world: World) -> None:
    category = world.administration
    use(category, 1_500_000)
    refused = signed_in("mia").post(
        "/c/new", {"text": "Rename the team", "model": "demo-large", "level": "rapide", "category": "administration"}
    )
    assert refused.status_code == 422

    today = timezone.now().astimezone(months.zone("Europe/Paris")).date()
    raise_form = {
        "raise-category": category.pk,
        "raise-tokens": 100_000,
        "raise-reason": "Year-end closing",
        "raise-ends_on": today.isoformat(),
    }
    # A member may not raise a budget, even by posting the form.
    assert signed_in("mia").post("/settings/budgets/raises", raise_form).status_code == 403
    assert not BudgetRaise.objects.exists()
    # Another organisation's admin cannot name this category.
    assert signed_in("mallory").post("/settings/budgets/raises", raise_form).status_code == 422
    before = timezone.now()
    assert signed_in("demo").post("/settings/budgets/raises", raise_form).status_code == 302
    raised = BudgetRaise.objects.get()
    assert (raised.created_by, raised.created_by_name, raised.tokens) == (world.admin, "demo", 100_000)
    assert raised.created >= before
    page = signed_in("demo").get("/settings/budgets/").content.decode()
    assert "Year-end closing" in page and ">demo<" in page and "+100,000" in page

    assert state.state_of(category).budget == 1_600_000
    ok = signed_in("mia").post(
        "/c/new", {"text": "Rename the team", "model": "demo-large", "level": "rapide", "category": "administration"}
    )
    assert ok.status_code == 302
    # The day after its end date, the raise no longer counts.
    assert state.state_of(category, timezone.now() + timedelta(days=1)).budget == 1_500_000
    # No other category moved.
    assert state.state_of(world.catalogue).budget == 4_000_000
    assert state.state_of(world.syntheses).budget == 4_500_000


def test_a_raise_needs_an_amount_a_reason_and_an_end_date_not_past(world: World) -> None:
    client = signed_in("demo")
    yesterday = (timezone.now() - timedelta(days=2)).date().isoformat()
    base = {
        "raise-category": world.catalogue.pk,
        "raise-tokens": 10,
        "raise-reason": "Because",
        "raise-ends_on": yesterday,
    }
    assert client.post("/settings/budgets/raises", base).status_code == 422
    assert (
        client.post(
            "/settings/budgets/raises", {**base, "raise-ends_on": "2099-01-01", "raise-reason": " "}
        ).status_code
        == 422
    )
    assert (
        client.post("/settings/budgets/raises", {**base, "raise-ends_on": "2099-01-01", "raise-tokens": 0}).status_code
        == 422
    )
    assert not BudgetRaise.objects.exists()


def test_an_admin_sets_the_time_zone(world: World) -> None:
    client = signed_in("demo")
    assert client.post("/settings/budgets/time-zone", {"zone-time_zone": "Mars/Olympus"}).status_code == 422
    assert client.post("/settings/budgets/time-zone", {"zone-time_zone": "Asia/Tokyo"}).status_code == 302
    world.demo.refresh_from_db()
    assert world.demo.time_zone == "Asia/Tokyo"


def test_the_usage_page_shows_this_organisations_month_only(world: World) -> None:
    _run(world.demo, "syntheses", 12_000, 0.04)
    _run(world.demo, "catalogue", 900, 0.001)
    _run(world.other, "obsidian", 77_777, 9.99)
    use(world.syntheses, 12_000, 0.04)
    page = html.unescape(signed_in("demo").get("/settings/usage/").content.decode())
    assert "Long multi-document syntheses" in page and "<svg" in page
    assert "Cost per model call (EUR), day by day, over three months" in page
    assert "mistral-small" in page  # per model
    assert "Main model" in page  # per main model and agent
    assert "g CO₂e" in page
    assert "Obsidian" not in page and "77,777" not in page and "9.99" not in page
    other = html.unescape(signed_in("mallory").get("/settings/usage/").content.decode())
    assert "Obsidian research" in other
    assert "Long multi-document syntheses" not in other and "12,000" not in other


def test_the_csv_lists_the_months_runs_of_this_organisation(world: World) -> None:
    mine = _run(world.demo, "syntheses", 12_000, 0.04)
    theirs = _run(world.other, "obsidian", 77_777, 9.99)
    response = signed_in("demo").get("/settings/usage.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["run"] for r in rows] == [str(mine.pk)]
    assert rows[0]["category"] == "syntheses" and rows[0]["total_tokens"] == "12000" and rows[0]["carbon_g"] == "0.5000"
    assert str(theirs.pk) not in response.content.decode()
    # Another month: nothing.
    assert len(signed_in("demo").get("/settings/usage.csv?month=2020-01").content.decode().splitlines()) == 1


def test_the_estimated_part_of_the_costs_is_marked_on_the_page_and_in_the_csv(world: World) -> None:
    run = _run(world.demo, "syntheses", 12_000, 0.04)
    usage = dict(run.usage)
    usage["estimated_eur"] = 0.0125
    usage["by_model"] = {"demo-small": {**usage["by_model"]["mistral-small"], "estimated_eur": 0.0125}}
    Run.objects.filter(pk=run.pk).update(usage=usage, model="demo-small")
    _run(world.demo, "catalogue", 900, 0.001)  # all reported

    rows = list(csv.DictReader(io.StringIO(signed_in("demo").get("/settings/usage.csv").content.decode())))
    assert sorted(r["estimated_eur"] for r in rows) == ["0.000000", "0.012500"]
    page = html.unescape(signed_in("demo").get("/settings/usage/").content.decode())
    assert page.count("of which 0.0125 estimated") >= 2  # its model's line, the total
    assert "Prices of 1 December 2025." in page  # the demo model's prices' date
    french = html.unescape(signed_in("demo").get("/settings/usage/", HTTP_ACCEPT_LANGUAGE="fr").content.decode())
    assert "dont 0,0125 estimés" in french and "Prix du 1er décembre 2025." in french


def test_the_csv_figures_are_those_of_the_runs_usage_in_parts_of_any_size(world: World, monkeypatch: Any) -> None:
    """Each line's figures are what ``RunUsage`` makes of the run's saved usage (models estimated or not, cut and
    failed calls, a usage without models), whichever part of the CSV the line falls in."""
    import random

    from assistant.budgets import usage_csv
    from assistant.budgets.report import Totals
    from assistant.engine.types import UsagePart
    from assistant.engine.usage import Impact, RunUsage

    rng = random.Random(7)
    usages = [{}, {"calls": 3, "prompt_tokens": 4200}]  # a usage without models (an old or odd one): zeros
    for _ in range(12):
        usage = RunUsage()
        for model in rng.sample(["mistral-small", "mistral-large", "demo-small"], rng.randint(1, 3)):
            for _call in range(rng.randint(1, 4)):
                part = UsagePart(
                    prompt_tokens=rng.randint(0, 9000),
                    completion_tokens=rng.randint(0, 900),
                    cached_prompt_tokens=rng.randint(0, 500),
                )
                impact = Impact(rng.random() / 1000, rng.random()) if model != "demo-small" else None
                usage.add(model, part, rng.random() / 100, impact, estimated=rng.random() < 0.2)
            if rng.random() < 0.3:
                usage.failed(model)
        usages.append(usage.as_dict())
    conversation = Conversation.objects.create(organisation=world.demo, user=world.admin, title="t")
    runs = [
        Run.objects.create(
            conversation=conversation, organisation=world.demo, user=world.admin, model="m", status="ok", usage=u
        )
        for u in usages
    ]
    monkeypatch.setattr(usage_csv, "CSV_CHUNK", 3)  # parts of 3 lines: every line's place in a part is tried
    assert len(list(usage_csv.usage_csv_parts(world.demo, timezone.now().date()))) == -(-len(runs) // 3)
    rows = list(csv.DictReader(io.StringIO(signed_in("demo").get("/settings/usage.csv").content.decode())))
    assert [r["run"] for r in rows] == [str(r.pk) for r in runs]
    for row, run in zip(rows, runs, strict=True):
        expected = Totals()
        expected.add_usage(RunUsage.of(run.usage))
        assert (row["calls"], row["prompt_tokens"], row["completion_tokens"], row["total_tokens"]) == (
            str(expected.calls),
            str(expected.prompt_tokens),
            str(expected.completion_tokens),
            str(expected.tokens),
        )
        assert row["cached_prompt_tokens"] == str(expected.cached_prompt_tokens)
        assert (row["cost_eur"], row["energy_wh"], row["carbon_g"]) == (
            f"{expected.cost_eur:.6f}",
            f"{expected.energy_wh:.4f}",
            f"{expected.carbon_g:.4f}",
        )


def test_csv_cells_a_spreadsheet_would_read_as_formulas_are_kept_as_text(world: World) -> None:
    # A user name, a category's slug or a model's id starting with = + - @ must not run in a spreadsheet.
    user = get_user_model().objects.create_user("@SUM(A1)", password="x")
    run = _run(world.demo, "-2+3", 100, 0.01)
    Run.objects.filter(pk=run.pk).update(user=user, model="=HYPERLINK(1)", level="+1")
    rows = list(csv.DictReader(io.StringIO(signed_in("demo").get("/settings/usage.csv").content.decode())))
    assert (rows[0]["user"], rows[0]["category"], rows[0]["model"], rows[0]["level"]) == (
        "'@SUM(A1)",
        "'-2+3",
        "'=HYPERLINK(1)",
        "'+1",
    )
    assert rows[0]["total_tokens"] == "100" and rows[0]["status"] == "ok"  # numbers and plain texts unchanged


def test_csv_cells_with_a_formula_after_whitespace_or_a_semicolon_are_kept_as_text(world: World) -> None:
    # Spreadsheets skip leading whitespace before a formula, read a tab, CR or newline start as one, and a
    # French locale splits cells on ";": each such part gets its apostrophe.
    payloads = {
        " =1+1": "' =1+1",
        "  @SUM(A1)": "'  @SUM(A1)",
        "\n=HYPERLINK(1)": "'\n=HYPERLINK(1)",
        "\r+1": "'\r+1",
        "\tcmd": "'\tcmd",
        "\u00a0-2": "'\u00a0-2",
        "safe;=1+1": "safe;'=1+1",
        "a; -1;b": "a;' -1;b",
        "plain; text": "plain; text",
    }
    conversation = Conversation.objects.create(organisation=world.demo, user=world.admin, title="t")
    for model in payloads:
        # Ended runs: a conversation has one running run at most.
        Run.objects.create(
            conversation=conversation, organisation=world.demo, user=world.admin, model=model, status="ok"
        )
    rows = list(csv.DictReader(io.StringIO(signed_in("demo").get("/settings/usage.csv").content.decode(), newline="")))
    assert sorted(r["model"] for r in rows) == sorted(payloads.values())


def test_the_csv_is_a_download_that_no_browser_renders_or_sniffs(world: World) -> None:
    response = signed_in("demo").get("/settings/usage.csv")
    assert response["Content-Disposition"].startswith("attachment; filename=")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"


def test_a_month_outside_the_calendar_shows_the_current_month_not_a_500(world: World) -> None:
    client = signed_in("demo")
    for month in ("0001-01", "1-3", "9999-12", "10000-01"):
        for url in ("/settings/usage/", "/settings/usage.csv"):
            assert client.get(f"{url}?month={month}").status_code == 200, (url, month)


def test_saving_categories_when_there_are_none_is_a_422_not_a_500(world: World) -> None:
    world.other_category.delete()
    response = signed_in("mallory").post("/settings/budgets/categories", {"default": "1"})
    assert response.status_code == 422
    assert "create one first" in response.content.decode()


def test_token_amounts_beyond_a_trillion_are_refused_before_a_sum_overflows(world: World) -> None:
    client = signed_in("demo")
    raise_post = {"raise-category": world.catalogue.pk, "raise-reason": "Audit", "raise-ends_on": "2099-01-01"}
    for tokens in (10**12 + 1, 2**63 - 1, 10**30):
        assert client.post("/settings/budgets/raises", {**raise_post, "raise-tokens": tokens}).status_code == 422
    new = {"new-name": "Huge", "new-slug": "huge", "new-monthly_tokens": 2**63 - 1, "new-alert_thresholds": "80"}
    assert client.post("/settings/budgets/categories/new", new).status_code == 422
    edit = _categories_post(world, **{f"c{world.catalogue.pk}-monthly_tokens": 10**12 + 1})
    assert client.post("/settings/budgets/categories", edit).status_code == 422
    assert not BudgetRaise.objects.exists() and not Category.objects.filter(slug="huge").exists()
    world.catalogue.refresh_from_db()
    assert world.catalogue.monthly_tokens == 4_000_000
    # A trillion is accepted, twice: the pages and the category's state still add them up.
    for _ in range(2):
        assert client.post("/settings/budgets/raises", {**raise_post, "raise-tokens": 10**12}).status_code == 302
    assert client.get("/settings/budgets/").status_code == 200
    assert state.state_of(world.catalogue).budget == 4_000_000 + 2 * 10**12
