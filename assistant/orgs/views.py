"""The organisation settings pages, for its admins: models, reasoning levels, parallel agents, agent profiles,
API keys, and the audit log of these changes (``audit.record`` after each one).

Every view starts from the signed-in admin's own organisation: a member gets 403, and another
organisation's profile does not exist here (404). Forms post, then redirect (a refused form comes
back with its errors and status 422).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from assistant.catalogue import snapshot
from assistant.catalogue.naming import model_label

from . import audit, keys
from .code import code_status
from .forms import (
    AgentProfileForm,
    AllowedModelsForm,
    ApiKeyForm,
    LevelForm,
    MemberDefaultForm,
    MemberLimitForm,
    ParallelForm,
)
from .http import AuthenticatedHttpRequest
from .models import KIND_CHOICES, AgentProfile, ApiKey, AuditEntry, Membership, Organisation
from .services import administered_organisation, levels_of, lock_organisation, policy_for
from .web import web_status

# The levels' names are the product's words, the same in every language.
LEVEL_LABELS = {"rapide": "Rapide", "standard": "Standard", "approfondi": "Approfondi", "maximal": "Maximal"}


def _level_forms(org: Organisation, data: Any = None) -> list[LevelForm]:
    return [LevelForm(data, instance=row, prefix=row.level) for row in levels_of(org)]


def _page(
    request: AuthenticatedHttpRequest,
    org: Organisation,
    *,
    models_form: AllowedModelsForm | None = None,
    level_forms: list[LevelForm] | None = None,
    parallel_form: ParallelForm | None = None,
    status: int = 200,
) -> HttpResponse:
    catalogue = snapshot.catalogue()
    policy = policy_for(org)
    profiles = [
        {
            "profile": p,
            "model_unavailable": bool(p.default_model)
            and not (p.default_model in catalogue and policy.allows(p.default_model)),
            # The model by its name and the kinds of resources in words: the page names no code.
            "model": model_label(catalogue[p.default_model].label) if p.default_model in catalogue else p.default_model,
            "kinds": ", ".join(str(words) for kind, words in KIND_CHOICES if kind in p.tools),
        }
        for p in org.agent_profiles.all()
    ]
    context = {
        "organisation": org,
        "models_form": models_form or AllowedModelsForm(organisation=org),
        "levels": [(LEVEL_LABELS[f.instance.level], f) for f in (level_forms or _level_forms(org))],
        "parallel_form": parallel_form or ParallelForm(instance=org, prefix="parallel"),
        "profiles": profiles,
        "allowed_now": [model_label(catalogue[m].label) for m in policy.allowed_ids(catalogue)],
        "code": code_status(),
        "web": web_status(),
    }
    return render(request, "orgs/settings.html", context, status=status)


@login_required
@require_GET
def settings_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _page(request, administered_organisation(request.user))


@login_required
@require_POST
def save_models(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    form = AllowedModelsForm(request.POST, organisation=org)
    if not form.is_valid():
        return _page(request, org, models_form=form, status=422)
    form.save()
    audit.record(
        request.user, org, "models.saved", org.name, allowed=Organisation.objects.get(pk=org.pk).allowed_models
    )
    messages.success(request, _("The models the assistant may use are saved."))
    return redirect("org_settings")


@login_required
@require_POST
def save_levels(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    with transaction.atomic():
        # A level's first save creates its row: two posts at once must not both create it.
        lock_organisation(org)
        forms = _level_forms(org, request.POST)
        parallel = ParallelForm(request.POST, instance=org, prefix="parallel")
        valid = all([f.is_valid() for f in forms]) and parallel.is_valid()
        if valid:
            changes = {
                f.instance.level: {name: f.cleaned_data[name] for name in f.changed_data}
                for f in forms
                if f.changed_data
            }
            changes |= {name: parallel.cleaned_data[name] for name in parallel.changed_data}
            for f in forms:
                f.save()
            parallel.save()
            audit.record(request.user, org, "levels.saved", org.name, **changes)
    if not valid:
        return _page(request, org, level_forms=forms, parallel_form=parallel, status=422)
    messages.success(request, _("The reasoning levels and the parallel-agent cap are saved."))
    return redirect("org_settings")


def _profile_page(request: AuthenticatedHttpRequest, org: Organisation, profile: AgentProfile | None) -> HttpResponse:
    form = AgentProfileForm(request.POST or None, instance=profile, organisation=org)
    if request.method == "POST":
        with transaction.atomic():
            lock_organisation(org)  # the name is checked (in any case) and saved one post at a time
            saved = form.save() if form.is_valid() else None
            if saved is not None:
                audit.record(
                    request.user,
                    org,
                    "profile.updated" if profile else "profile.created",
                    saved.name,
                    changed=form.changed_data,
                )
        if saved is not None:
            messages.success(request, _("The agent profile “%(name)s” is saved.") % {"name": saved.name})
            return redirect("org_settings")
        return render(request, "orgs/profile.html", {"form": form, "profile": profile}, status=422)
    return render(request, "orgs/profile.html", {"form": form, "profile": profile})


@login_required
@require_http_methods(["GET", "POST"])
def profile_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _profile_page(request, administered_organisation(request.user), None)


@login_required
@require_http_methods(["GET", "POST"])
def profile_edit(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    org = administered_organisation(request.user)
    return _profile_page(request, org, get_object_or_404(AgentProfile, pk=pk, organisation=org))


@login_required
@require_POST
def profile_delete(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    org = administered_organisation(request.user)
    profile = get_object_or_404(AgentProfile, pk=pk, organisation=org)
    profile.delete()
    audit.record(request.user, org, "profile.deleted", profile.name)
    messages.success(request, _("The agent profile “%(name)s” is deleted.") % {"name": profile.name})
    return redirect("org_settings")


def _keys_page(
    request: AuthenticatedHttpRequest,
    org: Organisation,
    form: ApiKeyForm | None = None,
    secret: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "organisation": org,
        "form": form or ApiKeyForm(organisation=org),
        "keys": org.api_keys.select_related("created_by", "replaced_by"),
        "grace_hours": f"{keys.grace_period().total_seconds() / 3600:g}",
        "secret": secret,
    }
    return render(request, "orgs/api_keys.html", context, status=status)


@login_required
@require_GET
def api_keys(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _keys_page(request, administered_organisation(request.user))


@login_required
@require_POST
def api_key_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    form = ApiKeyForm(request.POST, organisation=org)
    if not form.is_valid():
        return _keys_page(request, org, form=form, status=422)
    key, secret = keys.create_key(
        org,
        form.cleaned_data["name"],
        form.allowed_models(),
        created_by=request.user,
        expires=form.expires(),
        rate_limit=form.cleaned_data["rate_limit"],
        monthly_eur=form.cleaned_data["monthly_eur"],
        hard_cap=form.cleaned_data["limit_mode"] != "alert",
    )
    audit.record(
        request.user,
        org,
        "key.created",
        f"{key.name} ({key.prefix}…)",
        models=key.allowed_models,
        expires=key.expires,
        rate_limit=key.rate_limit,
        monthly_eur=key.monthly_eur,
        limit_mode=key.limit_mode if key.monthly_eur is not None else None,
    )
    messages.success(
        request, _("The key “%(name)s” is created. Copy it now: it will not be shown again.") % {"name": key.name}
    )
    # Rendered, not redirected: the secret exists only in this response.
    return _keys_page(request, org, secret=secret)


@login_required
@require_POST
def api_key_revoke(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    org = administered_organisation(request.user)
    key = get_object_or_404(ApiKey, pk=pk, organisation=org)
    was_active = key.revoked is None
    keys.revoke(key)
    if was_active:
        audit.record(request.user, org, "key.revoked", f"{key.name} ({key.prefix}…)")
    messages.success(request, _("The key “%(name)s” is revoked: it opens nothing any more.") % {"name": key.name})
    return redirect("api_keys")


@login_required
@require_POST
def api_key_rotate(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """A new key in place of this one, shown once; the old one works on for the grace period."""
    org = administered_organisation(request.user)
    key = get_object_or_404(ApiKey, pk=pk, organisation=org)
    try:
        new, secret = keys.rotate(key, request.user)
    except ValueError:
        messages.error(request, _("Only a working key that was not rotated yet can be rotated."))
        return _keys_page(request, org, status=422)
    key.refresh_from_db()
    audit.record(
        request.user,
        org,
        "key.rotated",
        f"{key.name} ({key.prefix}…)",
        new_key=f"{new.prefix}…",
        old_key_until=key.expires,
    )
    messages.success(
        request,
        _("The key “%(name)s” is rotated. Copy the new one now: it will not be shown again.") % {"name": new.name},
    )
    return _keys_page(request, org, secret=secret)


def _members_page(
    request: AuthenticatedHttpRequest,
    org: Organisation,
    default_form: MemberDefaultForm | None = None,
    invalid: tuple[int, MemberLimitForm] | None = None,
    status: int = 200,
) -> HttpResponse:
    members = []
    for m in Membership.objects.filter(organisation=org).select_related("user").order_by("user__username"):
        form = (
            invalid[1] if invalid is not None and invalid[0] == m.pk else MemberLimitForm(instance=m, prefix=f"m{m.pk}")
        )
        members.append({"membership": m, "form": form})
    context = {
        "organisation": org,
        "default_form": default_form or MemberDefaultForm(instance=org, prefix="default"),
        "members": members,
    }
    return render(request, "orgs/members.html", context, status=status)


@login_required
@require_GET
def members(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Settings → Members: the organisation's default spend limit for members, and each member's own."""
    return _members_page(request, administered_organisation(request.user))


@login_required
@require_POST
def members_default(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    form = MemberDefaultForm(request.POST, instance=org, prefix="default")
    if not form.is_valid():
        return _members_page(request, org, default_form=form, status=422)
    form.save()
    audit.record(
        request.user,
        org,
        "spend.default_saved",
        org.name,
        monthly_eur=org.member_monthly_eur,
        limit_mode=org.member_limit_mode,
    )
    messages.success(request, _("The members' default spend limit is saved."))
    return redirect("org_members")


@login_required
@require_POST
def member_limit(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    org = administered_organisation(request.user)
    membership = get_object_or_404(Membership.objects.select_related("user"), pk=pk, organisation=org)
    form = MemberLimitForm(request.POST, instance=membership, prefix=f"m{pk}")
    if not form.is_valid():
        return _members_page(request, org, invalid=(pk, form), status=422)
    form.save()
    name = membership.user.get_username()
    audit.record(
        request.user,
        org,
        "spend.member_saved",
        name,
        limit_mode=membership.limit_mode or "default",
        monthly_eur=membership.monthly_eur,
    )
    messages.success(request, _("The spend limit of %(name)s is saved.") % {"name": name})
    return redirect("org_members")


AUDIT_PAGE_SIZE = 50


@login_required
@require_GET
def audit_log(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The organisation's admin changes, newest first, for its admins only."""
    org = administered_organisation(request.user)
    entries = AuditEntry.objects.filter(organisation=org).select_related("actor")
    page = Paginator(entries, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"entry": e, "action": audit.wording(e.action), "details": audit.details_text(e.details)} for e in page]
    return render(request, "orgs/audit.html", {"organisation": org, "page": page, "rows": rows})
