"""The settings page's web line says which web tools are on here: the demo web (DEMO_WEB, its pages counted), the
real ones (SearxNG's host, web_fetch's address guard and allow-list), or none; in English and French."""

from __future__ import annotations

from html import unescape

import pytest
from pytest_django import Settings

from assistant.demo.web import demo_web
from tests.orgs.orgs_support import World, signed_in

pytestmark = pytest.mark.django_db


def _web_section(language: str = "en") -> str:
    client = signed_in("demo")
    client.cookies["django_language"] = language
    html = unescape(client.get("/settings/").content.decode())
    return html.split('<section id="web" class="card">')[1].split("</section>")[0]


def _configure(
    settings: Settings, demo: bool, search_url: str = "", fetch: bool = False, hosts: tuple[str, ...] = ()
) -> None:
    settings.DEMO_WEB, settings.WEB_SEARCH_URL, settings.WEB_FETCH_ENABLED = demo, search_url, fetch
    settings.WEB_FETCH_ALLOWED_HOSTS = list(hosts)


def test_the_page_says_the_web_tools_read_the_demo_web(world: World, settings: Settings) -> None:
    _configure(settings, demo=True, search_url="https://searx.example.org/search", fetch=True)
    n = len(demo_web())
    english = _web_section()
    assert f"web_search and web_fetch are on, over the demo web (DEMO_WEB): {n} fictional pages shipped" in english
    assert "No page of the internet is searched or read." in english
    assert "searx.example.org" not in english  # the demo web wins: SearxNG is not used
    french = _web_section("fr")
    assert f"web_search et web_fetch sont activés, sur le web de démo (DEMO_WEB) : {n} pages fictives" in french
    assert "Aucune page d’internet n’est cherchée ni lue." in french


def test_the_page_says_which_real_web_tools_are_on(world: World, settings: Settings) -> None:
    _configure(
        settings, demo=False, search_url="https://searx.example.org/search", fetch=True, hosts=("wiki.internal",)
    )
    english = _web_section()
    assert "web_search (through searx.example.org) and web_fetch are on." in english
    assert "web_fetch reads public addresses only" in english and "Allowed on any address: wiki.internal." in english
    assert "demo web" not in english
    assert "web_search (via searx.example.org) et web_fetch sont activés." in _web_section("fr")

    _configure(settings, demo=False, fetch=True)
    assert "web_fetch is on; web_search is off (WEB_SEARCH_URL)." in _web_section()
    _configure(settings, demo=False, search_url="https://searx.example.org/search", fetch=False)
    english = _web_section()
    assert "web_search (through searx.example.org) is on; web_fetch is off." in english
    assert "public addresses only" not in english


def test_the_page_says_when_no_web_tool_is_on(world: World, settings: Settings) -> None:
    _configure(settings, demo=False)
    assert "No web tool on this server (WEB_SEARCH_URL, WEB_FETCH_ENABLED, DEMO_WEB)." in _web_section()
    assert "Aucun outil web sur ce serveur" in _web_section("fr")
