"""The admins' budgets and usage pages: categories and their budgets, temporary raises, the time zone,
alerts, and the month's consumption, cost and carbon with its CSV.

"My usage" is every member's own month (their spend against their spend limit). Every other view starts from the
signed-in admin's own organisation: a member gets 403, another
organisation's category or alert does not exist here (404). Forms post, then redirect (a refused form
comes back with its errors and status 422).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from assistant.orgs import audit
from assistant.orgs.http import AuthenticatedHttpRequest, attachment_response
from assistant.orgs.models import Organisation
from assistant.orgs.services import administered_organisation, lock_organisation, organisation_of

from . import alerts, csv_export, services, state
from .forms import CategoryForm, LandingWatchForm, RaiseForm, TimeZoneForm
from .landings import MIN_AGENTS
from .models import MAX_CATEGORIES, BudgetAlert, BudgetRaise, Category, LandingAlert
from .months import month_of, parse_month, zone
from .report import member_usage, usage_report
from .spend_lines import spend_csv


def _today(org: Organisation) -> Any:
    return timezone.now().astimezone(zone(org.time_zone)).date()


def _category_forms(org: Organisation, data: Any = None) -> list[CategoryForm]:
    return [CategoryForm(data, instance=c, organisation=org, prefix=f"c{c.pk}") for c in services.categories_of(org)]


def _page(
    request: AuthenticatedHttpRequest,
    org: Organisation,
    *,
    category_forms: list[CategoryForm] | None = None,
    new_form: CategoryForm | None = None,
    raise_form: RaiseForm | None = None,
    zone_form: TimeZoneForm | None = None,
    landing_form: LandingWatchForm | None = None,
    status: int = 200,
) -> HttpResponse:
    now = timezone.now()
    today = _today(org)
    forms = category_forms or _category_forms(org)
    rows = [{"form": f, "state": state.state_of(f.instance, now)} for f in forms]
    raises = BudgetRaise.objects.filter(category__organisation=org).select_related("category")[:100]
    context = {
        "organisation": org,
        "rows": rows,
        "can_add": len(rows) < MAX_CATEGORIES,
        "max_categories": MAX_CATEGORIES,
        "new_form": new_form or CategoryForm(organisation=org, prefix="new"),
        "raise_form": raise_form or RaiseForm(organisation=org, today=today, prefix="raise"),
        "zone_form": zone_form or TimeZoneForm(instance=org, prefix="zone"),
        "landing_form": landing_form or LandingWatchForm(instance=org, prefix="landing"),
        "landing_min_agents": MIN_AGENTS,
        "raises": [{"raise": r, "active": r.ends_on >= today} for r in raises],
        "today": today,
    }
    return render(request, "budgets/budgets.html", context, status=status)


@login_required
@require_GET
def budgets_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _page(request, administered_organisation(request.user))


@login_required
@require_POST
def save_categories(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    try:
        with transaction.atomic():
            lock_organisation(org)  # names checked and saved one post at a time
            forms = _category_forms(org, request.POST)
            if not forms:  # an organisation without categories has nothing to save here (it creates one first)
                messages.error(request, _("There is no category to save yet: create one first."))
                return _page(request, org, status=422)
            chosen = request.POST.get("default", "")
            default = next((f.instance for f in forms if str(f.instance.pk) == chosen), None)
            names = [f.cleaned_data.get("name", "").lower() for f in forms if f.is_valid()]
            if len(set(names)) < len(names):
                forms[0].add_error(None, _("Two categories cannot have the same name."))
            if not all([f.is_valid() for f in forms]) or default is None:
                if default is None:
                    messages.error(request, _("Choose the default category."))
                return _page(request, org, category_forms=forms, status=422)
            for f in forms:
                f.save()
            # One default at a time: clear the others before setting it (a constraint checks it).
            Category.objects.filter(organisation=org).exclude(pk=default.pk).update(is_default=False)
            Category.objects.filter(pk=default.pk).update(is_default=True)
            changes = {f.instance.name: {n: f.cleaned_data[n] for n in f.changed_data} for f in forms if f.changed_data}
            audit.record(request.user, org, "categories.saved", org.name, default=default.name, **changes)
    except IntegrityError:  # two names swapped in one post, say: the constraint refused it, nothing is saved
        messages.error(request, _("Two categories cannot have the same name."))
        return _page(request, org, category_forms=_category_forms(org, request.POST), status=422)
    messages.success(request, _("The categories and their budgets are saved."))
    return redirect("budgets")


@login_required
@require_POST
def new_category(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    form = CategoryForm(request.POST, organisation=org, prefix="new")
    with transaction.atomic():
        # The count and the names are checked and the category saved one post at a time.
        lock_organisation(org)
        existing = Category.objects.filter(organisation=org)
        if existing.count() >= MAX_CATEGORIES:
            form.add_error(None, _("At most %(n)s categories: a few broad ones work best.") % {"n": MAX_CATEGORIES})
        if form.is_valid():
            category = form.save(commit=False)
            category.is_default = not existing.filter(is_default=True).exists()
            category.position = existing.count()
            category.save()
            audit.record(request.user, org, "category.created", category.name, monthly_tokens=category.monthly_tokens)
        else:
            category = None
    if category is None:
        return _page(request, org, new_form=form, status=422)
    messages.success(request, _("The category “%(name)s” is created.") % {"name": category.name})
    return redirect("budgets")


@login_required
@require_POST
def add_raise(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    form = RaiseForm(request.POST, organisation=org, today=_today(org), prefix="raise")
    if not form.is_valid():
        return _page(request, org, raise_form=form, status=422)
    data = form.cleaned_data
    raised = alerts.raise_budget(data["category"], request.user, data["tokens"], data["reason"], data["ends_on"])
    messages.success(
        request,
        _("“%(name)s” is raised by %(tokens)s tokens until %(date)s.")
        % {
            "name": raised.category.shown_name,
            "tokens": formats.number_format(raised.tokens, force_grouping=True),
            "date": formats.date_format(raised.ends_on, "SHORT_DATE_FORMAT"),
        },
    )
    return redirect("budgets")


@login_required
@require_POST
def save_time_zone(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    # Its own copy: a refused zone must not reach the page that shows the form again.
    form = TimeZoneForm(request.POST, instance=Organisation.objects.get(pk=org.pk), prefix="zone")
    if not form.is_valid():
        return _page(request, org, zone_form=form, status=422)
    form.save()
    audit.record(request.user, org, "time_zone.saved", org.name, time_zone=form.instance.time_zone)
    messages.success(request, _("The time zone is saved: budgets reset at midnight on the 1st there."))
    return redirect("budgets")


@login_required
@require_POST
def save_landing_watch(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    # Its own copy: a refused value must not reach the page that shows the form again.
    form = LandingWatchForm(request.POST, instance=Organisation.objects.get(pk=org.pk), prefix="landing")
    if not form.is_valid():
        return _page(request, org, landing_form=form, status=422)
    form.save()
    percent = form.instance.forced_landing_alert_percent
    audit.record(request.user, org, "landing_watch.saved", org.name, forced_landing_alert_percent=percent)
    messages.success(
        request,
        _("Saved: an alert when %(percent)s %% of a model's agents in a month end by forced landing or budget.")
        % {"percent": percent},
    )
    return redirect("budgets")


def _month(request: AuthenticatedHttpRequest, org: Organisation) -> Any:
    return parse_month(request.GET.get("month")) or month_of(timezone.now(), zone(org.time_zone))


@login_required
@require_GET
def usage_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    report = usage_report(org, _month(request, org), timezone.now())
    csv_export.prepare()  # the worker that builds the CSV, set up before its link is followed
    return render(request, "budgets/usage.html", {"organisation": org, **report})


@login_required
@require_GET
def usage_export(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    month = _month(request, org)
    # Built in a child process: a large month's lines do not hold the interpreter the other requests need.
    csv = csv_export.usage_csv_download(org, month)
    return attachment_response(csv, f"usage-{org.slug}-{month:%Y-%m}.csv", "text/csv; charset=utf-8")


@login_required
@require_POST
def alert_seen(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    org = administered_organisation(request.user)
    alert = get_object_or_404(BudgetAlert, pk=pk, category__organisation=org)
    alert.mark_seen(request.user)
    return redirect(f"{reverse('usage')}?month={alert.month:%Y-%m}")


@login_required
@require_POST
def landing_alert_seen(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    org = administered_organisation(request.user)
    alert = get_object_or_404(LandingAlert, pk=pk, organisation=org)
    alert.mark_seen(request.user)
    return redirect(f"{reverse('usage')}?month={alert.month:%Y-%m}#landings")


@login_required
@require_GET
def usage_spend_export(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every member's and every API key's month against its spend limit."""
    org = administered_organisation(request.user)
    month = _month(request, org)
    return attachment_response(spend_csv(org, month), f"spend-{org.slug}-{month:%Y-%m}.csv", "text/csv; charset=utf-8")


@login_required
@require_GET
def my_usage(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The signed-in member's own month: their chat runs and scheduled tasks, against their spend limit."""
    org = organisation_of(request.user)
    report = member_usage(org, request.user.pk, _month(request, org), timezone.now())
    return render(request, "budgets/my_usage.html", {"organisation": org, **report})
