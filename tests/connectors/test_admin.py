"""The connector pages: an admin registers an MCP server, sees its tools live and picks the read-only ones.

Headers come only from CONNECTOR_ variables (named, never stored by value); a private address is refused
unless CONNECTOR_ALLOWED_HOSTS lists it; members and other organisations' admins reach nothing; every
change is in the audit log.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_django import Settings

from assistant.connectors.models import Connector
from assistant.orgs.models import AuditEntry
from tests.connectors.connectors_support import TOKEN, register
from tests.connectors.mcp_server import CrmServer
from tests.orgs.orgs_support import World, build_world, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    return build_world()


def test_an_admin_registers_a_connector_and_only_its_read_only_tools_are_offered(
    world: World, crm_allowed: CrmServer
) -> None:
    admin = signed_in("demo")
    response = register(admin, crm_allowed)
    assert response.status_code == 302 and response["Location"] == "/settings/connectors/crm/"
    connector = Connector.objects.get(organisation=world.demo)
    assert connector.tool_names == ["search_customers"]  # the write tool is not picked
    assert connector.tools[0]["input_schema"]["properties"]["query"]["type"] == "string"
    assert connector.headers == [{"header": "Authorization", "env": "CONNECTOR_CRM_TOKEN"}]
    stored = json.dumps([connector.headers, connector.tools, connector.url])
    assert TOKEN not in stored  # the value is never stored
    entry = AuditEntry.objects.get(organisation=world.demo, action="connector.created")
    assert entry.target == "mcp:crm" and entry.details["tools"] == ["search_customers"]
    assert TOKEN not in json.dumps(entry.details)

    # The page lists the server's tools live: the write one shown, never offerable.
    page = admin.get("/settings/connectors/crm/").content.decode()
    assert 'value="search_customers" checked' in page
    assert 'value="delete_customer" disabled' in page and "may write: never offered" in page
    assert "CONNECTOR_CRM_TOKEN" in page and TOKEN not in page
    assert "crm" in admin.get("/settings/connectors/").content.decode()


def _edit(**changes: Any) -> dict[str, Any]:
    return {
        "name": "crm",
        "url": "",
        "headers_text": "Authorization: CONNECTOR_CRM_TOKEN",
        "enabled": "on",
        "tools_shown": "1",
        **changes,
    }


def test_the_admin_picks_the_tools_and_a_write_tool_cannot_be_picked(world: World, crm_allowed: CrmServer) -> None:
    admin = signed_in("demo")
    register(admin, crm_allowed)
    response = admin.post("/settings/connectors/crm/", _edit(url=crm_allowed.url, tools=["delete_customer"]))
    assert response.status_code == 422
    assert "delete_customer may write: only tools annotated read-only can be offered." in response.content.decode()
    assert Connector.objects.get().tool_names == ["search_customers"]

    response = admin.post("/settings/connectors/crm/", _edit(url=crm_allowed.url))  # none ticked
    assert response.status_code == 302
    assert Connector.objects.get().tool_names == []
    assert AuditEntry.objects.filter(action="connector.updated", target="mcp:crm").count() == 1

    response = admin.post("/settings/connectors/crm/", _edit(url=crm_allowed.url, tools=["search_customers"]))
    assert response.status_code == 302 and Connector.objects.get().tool_names == ["search_customers"]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("Authorization: DJANGO_SECRET_KEY", "only from an environment variable whose name starts with CONNECTOR_"),
        ("Authorization: MISTRAL_API_KEY", "only from an environment variable whose name starts with CONNECTOR_"),
        ("Authorization: CONNECTOR_ALLOWED_HOSTS", "not CONNECTOR_ALLOWED_HOSTS"),
        ("Authorization: CONNECTOR_NOT_SET", "the variable CONNECTOR_NOT_SET is not set on this server"),
        ("Authorization CONNECTOR_CRM_TOKEN", "write “Header: CONNECTOR_VARIABLE”"),
        ("Host: CONNECTOR_CRM_TOKEN", "“Host” cannot be sent as a header"),
    ],
)
def test_a_header_can_only_come_from_a_connector_variable(
    world: World, crm_allowed: CrmServer, monkeypatch: pytest.MonkeyPatch, line: str, says: str
) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", "do-not-leak")
    response = register(signed_in("demo"), crm_allowed, headers_text=line)
    assert response.status_code == 422
    body = response.content.decode()
    assert says in body and "do-not-leak" not in body
    assert not Connector.objects.exists() and not crm_allowed.calls


def test_a_private_address_is_refused_unless_allowed(world: World, crm: CrmServer, settings: Settings) -> None:
    admin = signed_in("demo")
    settings.CONNECTOR_ALLOWED_HOSTS = []
    response = register(admin, crm, headers_text="")
    body = response.content.decode()
    assert response.status_code == 422
    assert "127.0.0.1, a private, loopback or link-local address" in body
    assert "unless CONNECTOR_ALLOWED_HOSTS lists the host" in body
    # The host allowed on ports 80 and 443 only is still refused on the server's port.
    settings.CONNECTOR_ALLOWED_HOSTS = ["127.0.0.1"]
    response = register(admin, crm, headers_text="")
    assert response.status_code == 422 and "allowed on ports 80, 443 only" in response.content.decode()
    for url in ("ftp://example.com/mcp", "http://user:pw@example.com/mcp", "no address"):
        response = register(admin, crm, headers_text="", url=url)
        assert response.status_code == 422
    assert not Connector.objects.exists()
    settings.CONNECTOR_ALLOWED_HOSTS = [crm.url.split("/")[2]]
    assert register(admin, crm, headers_text="").status_code == 302


def test_an_unreachable_server_is_said_and_nothing_is_saved(world: World, settings: Settings) -> None:
    settings.CONNECTOR_ALLOWED_HOSTS = ["127.0.0.1:9"]
    settings.CONNECTOR_TIMEOUT_SECONDS = 3
    response = register(signed_in("demo"), CrmServer(url="http://127.0.0.1:9/mcp"), headers_text="")
    assert response.status_code == 422
    assert "tools could not be listed: http://127.0.0.1:9/mcp could not be reached" in response.content.decode()
    assert not Connector.objects.exists()


def test_members_and_other_organisations_reach_nothing(world: World, crm_allowed: CrmServer) -> None:
    register(signed_in("demo"), crm_allowed)
    member = signed_in("mia")
    assert member.get("/settings/connectors/").status_code == 403
    assert member.get("/settings/connectors/crm/").status_code == 403
    assert register(member, crm_allowed, name="mine").status_code == 403
    mallory = signed_in("mallory")
    assert "mcp:crm" not in mallory.get("/settings/connectors/").content.decode()
    assert mallory.get("/settings/connectors/crm/").status_code == 404
    assert mallory.post("/settings/connectors/crm/delete").status_code == 404
    # The same name in another organisation is another connector.
    assert register(mallory, crm_allowed).status_code == 302
    assert Connector.objects.filter(name="crm").count() == 2


def test_deleting_a_connector_is_recorded(world: World, crm_allowed: CrmServer) -> None:
    admin = signed_in("demo")
    register(admin, crm_allowed)
    assert admin.get("/settings/connectors/crm/delete").status_code == 200
    response = admin.post("/settings/connectors/crm/delete")
    assert response.status_code == 302 and not Connector.objects.exists()
    assert AuditEntry.objects.filter(organisation=world.demo, action="connector.deleted", target="mcp:crm").exists()
    audit = admin.get("/settings/audit/").content.decode()
    assert "deleted a connector" in audit and "registered a connector" in audit


def test_the_pages_speak_french(world: World, crm_allowed: CrmServer) -> None:
    admin = signed_in("demo")
    admin.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    response = register(admin, crm_allowed, headers_text="Authorization: DJANGO_SECRET_KEY")
    body = response.content.decode()
    assert "Nouveau connecteur" in body and "Adresse (HTTP streamable)" in body
    assert "la valeur d’un en-tête ne vient que d’une variable d’environnement" in body
    register(admin, crm_allowed)
    page = admin.get("/settings/connectors/crm/").content.decode()
    assert "Outils proposés" in page and "peut écrire : jamais proposé" in page
    assert "Gérer les connecteurs" in admin.get("/settings/").content.decode()
    assert "<legend>Connecteurs</legend>" in admin.get("/").content.decode()  # the composer's + menu
    assert "a enregistré un connecteur" in admin.get("/settings/audit/").content.decode()
