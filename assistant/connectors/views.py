"""The connector pages, for an organisation's admins: the list, a new connector, edit (tools picked), delete.

Every lookup goes through the admin's own organisation: another organisation's connector does not
exist here (404); a member gets 403. Each change is recorded in the audit log.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from assistant.engine.connectors import ConnectorError, ListedTool, list_tools
from assistant.orgs import audit
from assistant.orgs.http import AuthenticatedHttpRequest
from assistant.orgs.models import Organisation
from assistant.orgs.services import administered_organisation

from .directory import limits
from .forms import ConnectorForm, available_env
from .models import Connector


def _connector(org: Organisation, name: str) -> Connector:
    return get_object_or_404(Connector, organisation=org, name=name)


@login_required
@require_GET
def connectors(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = administered_organisation(request.user)
    return render(request, "connectors/list.html", {"organisation": org, "connectors": org.connectors.all()})


def _tool_rows(connector: Connector | None, listed: list[ListedTool] | None) -> list[dict[str, Any]]:
    """The tools as the form shows them: listed live when the server answered, else the picked ones."""
    picked = set(connector.tool_names) if connector is not None else set()
    if listed is None:
        return [
            {"name": t.get("name"), "description": t.get("description", ""), "read_only": True, "picked": True}
            for t in (connector.tools if connector is not None else [])
            if isinstance(t, dict)
        ]
    default = connector is None
    return [
        {
            "name": t.name,
            "description": t.description,
            "read_only": t.read_only,
            "picked": t.read_only and (default or t.name in picked),
        }
        for t in listed
    ]


def _form_page(request: AuthenticatedHttpRequest, connector: Connector | None) -> HttpResponse:
    org = administered_organisation(request.user)
    previous = connector.name if connector is not None else None
    form = ConnectorForm(request.POST or None, instance=connector, organisation=org)
    listed: list[ListedTool] | None = None
    listing_error = ""
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                with transaction.atomic():
                    saved = form.save()
                    audit.saved(
                        request.user,
                        org,
                        "connector",
                        connector is None,
                        saved.resource,
                        url=saved.url,
                        tools=saved.tool_names,
                        headers=[f"{h}: {e}" for h, e in saved.header_pairs()],
                        enabled=saved.enabled,
                        previous=previous,
                    )
            except IntegrityError:
                form.add_error("name", _("A connector with this name already exists."))
            else:
                messages.success(request, _("The connector “%(name)s” is saved.") % {"name": saved.name})
                return redirect("connector_edit", name=saved.name)
        listed = form.listed
        status = 422
    elif connector is not None:
        try:
            listed = async_to_sync(list_tools)(connector.config(), limits())
        except ConnectorError as e:
            listing_error = _("The server's tools could not be listed: %(reason)s.") % {"reason": e}
    context = {
        "form": form,
        "connector": connector,
        "tools": _tool_rows(connector, listed),
        "listing_error": listing_error,
        "env_names": available_env(),
    }
    return render(request, "connectors/form.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def connector_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _form_page(request, None)


@login_required
@require_http_methods(["GET", "POST"])
def connector_edit(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    org = administered_organisation(request.user)
    return _form_page(request, _connector(org, name))


@login_required
@require_http_methods(["GET", "POST"])
def connector_delete(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    org = administered_organisation(request.user)
    connector = _connector(org, name)
    if request.method == "POST":
        with transaction.atomic():
            connector.delete()
            audit.record(request.user, org, "connector.deleted", connector.resource, url=connector.url)
        messages.success(request, _("The connector “%(name)s” is deleted.") % {"name": name})
        return redirect("connectors")
    return render(request, "connectors/delete.html", {"connector": connector})
