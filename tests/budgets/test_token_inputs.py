"""Token fields take what people type: any positive whole number, grouped by thousands or not; clear errors else."""

from __future__ import annotations

from datetime import date

import pytest
from django.utils import translation

from assistant.budgets.forms import CategoryForm, RaiseForm
from assistant.budgets.models import BudgetRaise, Category
from tests.budgets.budgets_support import World, signed_in

RAISE = {"raise-reason": "Year-end closing", "raise-ends_on": "2099-01-01"}


@pytest.mark.parametrize(
    ("typed", "tokens"),
    [("500000", 500_000), ("500 000", 500_000), ("500\u202f000", 500_000), ("1,234,567", 1_234_567), ("7", 7)],
)
def test_a_raise_takes_any_positive_number_of_tokens(world: World, typed: str, tokens: int) -> None:
    response = signed_in("demo").post(
        "/settings/budgets/raises", {**RAISE, "raise-category": world.catalogue.pk, "raise-tokens": typed}
    )
    assert response.status_code == 302
    assert BudgetRaise.objects.get().tokens == tokens


def test_monthly_tokens_take_a_number_that_is_no_multiple_of_a_thousand(world: World) -> None:
    response = signed_in("demo").post(
        "/settings/budgets/categories/new",
        {"new-name": "Odd", "new-slug": "odd", "new-monthly_tokens": "1234", "new-alert_thresholds": "80"},
    )
    assert response.status_code == 302
    assert Category.objects.get(slug="odd").monthly_tokens == 1234


def test_the_fields_give_the_browser_no_step_to_refuse_a_number_with(world: World) -> None:
    for form, name in (
        (RaiseForm(organisation=world.demo, today=date.today(), prefix="raise"), "tokens"),
        (CategoryForm(organisation=world.demo, prefix="new"), "monthly_tokens"),
    ):
        html = str(form[name])
        assert 'inputmode="numeric"' in html and "step" not in html and "min=" not in html


@pytest.mark.parametrize(
    ("typed", "english", "french"),
    [
        ("0", "At least 1 token.", "Au moins 1 jeton."),
        ("-5", "At least 1 token.", "Au moins 1 jeton."),
        ("lots", "Enter a whole number of tokens", "Saisissez un nombre entier de jetons"),
        ("1.5", "Enter a whole number of tokens", "Saisissez un nombre entier de jetons"),
        ("12 34", "Enter a whole number of tokens", "Saisissez un nombre entier de jetons"),
        (str(10**12 + 1), "At most", "Au plus"),
    ],
)
def test_a_wrong_number_of_tokens_says_why_in_english_and_french(
    world: World, typed: str, english: str, french: str
) -> None:
    for language, expected in (("en", english), ("fr", french)):
        with translation.override(language):
            form = RaiseForm(
                {**RAISE, "raise-category": world.catalogue.pk, "raise-tokens": typed},
                organisation=world.demo,
                today=date.today(),
                prefix="raise",
            )
            assert not form.is_valid()
            assert expected in " ".join(map(str, form.errors["tokens"])), (language, form.errors)
