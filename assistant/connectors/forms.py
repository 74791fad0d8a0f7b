"""The connector form: name, address, headers from ``CONNECTOR_`` variables, and the tools offered.

Saving connects to the server (through the address guard) and lists its tools live: an address the
guard refuses, a server that does not answer, or a header whose variable is not set is an error of the
form, and nothing is saved. A new connector offers the tools annotated ``readOnlyHint: true``; on edit
the admin ticks which of them are offered. A tool that may write can never be picked.
"""

from __future__ import annotations

import os
from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from assistant.engine.connectors import (
    RESERVED_ENV,
    ConnectorConfig,
    ConnectorError,
    ListedTool,
    check_address,
    check_env_name,
    check_header_name,
    check_url,
    list_tools,
)
from assistant.orgs.models import Organisation

from .directory import limits
from .models import Connector


def available_env() -> list[str]:
    """The ``CONNECTOR_`` variables this server sets, by name (their values are never shown)."""
    return sorted(n for n in os.environ if n.startswith("CONNECTOR_") and check_env_name(n) is None)


def parse_headers(text: str) -> tuple[list[dict[str, str]], list[str]]:
    """``Header: CONNECTOR_VARIABLE`` lines as stored pairs, and the errors, in the reader's language."""
    pairs: list[dict[str, str]] = []
    errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        header, colon, env = line.partition(":")
        header, env = header.strip(), env.strip()
        if not colon or not header or not env:
            errors.append(gettext("Line %(n)s: write “Header: CONNECTOR_VARIABLE”.") % {"n": number})
        elif check_header_name(header) is not None:
            errors.append(
                gettext("Line %(n)s: “%(header)s” cannot be sent as a header.") % {"n": number, "header": header}
            )
        elif not env.startswith("CONNECTOR_") or check_env_name(env) is not None:
            errors.append(
                gettext(
                    "Line %(n)s: “%(env)s” is not allowed: a header's value comes only from an environment "
                    "variable whose name starts with CONNECTOR_ (not %(reserved)s)."
                )
                % {"n": number, "env": env, "reserved": ", ".join(sorted(RESERVED_ENV))}
            )
        elif env not in os.environ:
            errors.append(
                gettext("Line %(n)s: the variable %(env)s is not set on this server.") % {"n": number, "env": env}
            )
        elif any(p["header"].lower() == header.lower() for p in pairs):
            errors.append(
                gettext("Line %(n)s: the header %(header)s is given twice.") % {"n": number, "header": header}
            )
        else:
            pairs.append({"header": header, "env": env})
    return pairs, errors


def headers_text(pairs: list[Any]) -> str:
    return "\n".join(f"{p['header']}: {p['env']}" for p in pairs if isinstance(p, dict))


class ConnectorForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    headers_text = forms.CharField(
        required=False,
        label=_("Headers"),
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Authorization: CONNECTOR_CRM_TOKEN"}),
        help_text=_(
            "One per line, “Header: CONNECTOR_VARIABLE”. The value is read from that environment variable at "
            "each call and never stored; only variables whose names start with CONNECTOR_ can be named."
        ),
    )

    class Meta:
        model = Connector
        fields = ["name", "description", "url", "enabled"]
        labels = {
            "name": _("Name"),
            "description": _("Description"),
            "url": _("Address (streamable HTTP)"),
            "enabled": _("Offered to requests"),
        }
        help_texts = {
            "name": _("How requests name it (mcp:<name>): lowercase letters, digits and hyphens."),
            "url": _(
                "The MCP server's streamable HTTP endpoint, e.g. https://crm.example.com/mcp. Private addresses "
                "are refused unless the server's CONNECTOR_ALLOWED_HOSTS lists the host."
            ),
        }

    def __init__(self, *args: Any, organisation: Organisation, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.organisation = organisation
        self.instance.organisation = organisation
        self.listed: list[ListedTool] | None = None
        if self.instance.pk is not None:
            self.fields["headers_text"].initial = headers_text(self.instance.headers)

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"]).strip().lower()
        if not name or not all(c.isascii() and (c.isalnum() or c == "-") for c in name):
            raise forms.ValidationError(gettext("Lowercase letters, digits and hyphens only."))
        taken = Connector.objects.filter(organisation=self.organisation, name=name).exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(gettext("A connector with this name already exists."))
        return name

    def clean_url(self) -> str:
        url = str(self.cleaned_data["url"]).strip()
        refusal = check_url(url)
        if refusal is None:
            refusal = async_to_sync(check_address)(url, limits())
        if refusal is not None:
            raise forms.ValidationError(refusal)
        return url

    def clean_headers_text(self) -> list[dict[str, str]]:
        pairs, errors = parse_headers(str(self.cleaned_data.get("headers_text") or ""))
        if errors:
            raise forms.ValidationError(errors)
        return pairs

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        config = ConnectorConfig(
            name=data["name"],
            url=data["url"],
            headers=tuple((p["header"], p["env"]) for p in data["headers_text"]),
        )
        try:
            self.listed = async_to_sync(list_tools)(config, limits())
        except ConnectorError as e:
            raise forms.ValidationError(
                gettext("The server's tools could not be listed: %(reason)s.") % {"reason": e}
            ) from e
        listed = {t.name: t for t in self.listed}
        if self.instance.pk is None or "tools_shown" not in self.data:
            picked = [t.name for t in self.listed if t.read_only]
        else:
            picked = list(dict.fromkeys(str(n) for n in self.data.getlist("tools")))  # type: ignore[attr-defined]  # a bound form's data is a QueryDict; the stubs type it as a Mapping
            writes = [n for n in picked if n in listed and not listed[n].read_only]
            if writes:
                raise forms.ValidationError(
                    gettext("%(tools)s may write: only tools annotated read-only can be offered.")
                    % {"tools": ", ".join(writes)}
                )
            gone = [n for n in picked if n not in listed]
            if gone:
                raise forms.ValidationError(
                    gettext("The server no longer offers %(tools)s.") % {"tools": ", ".join(gone)}
                )
        self.instance.headers = data["headers_text"]
        self.instance.tools = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in self.listed
            if t.name in picked
        ]
        return data
