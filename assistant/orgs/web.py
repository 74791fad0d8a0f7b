"""The web tools as this server is configured (settings ``WEB_*`` and ``DEMO_WEB``), and what the settings page
says of them.

``web_config`` is the one reading of those settings: ``knowledge.tools`` builds the run's web tools from it, the
settings page words it (``web_status``). An offline web (the demo web: pages a project ships, read without the
network) is registered by the app that brings it, from its ``AppConfig.ready`` (``register_offline_web``);
``DEMO_WEB`` turns it on, and nothing here names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from django.conf import settings

from assistant.engine.tools import ToolFactory
from assistant.engine.web import WebConfig, web_tools


class OfflineWeb(Protocol):
    """Pages shipped with the project, searched and read offline through the web tools (the demo web)."""

    def tools(self, config: WebConfig) -> ToolFactory:
        """``web_search`` and ``web_fetch`` over its pages, with ``config``'s limits."""

    def page_count(self) -> int: ...

    def address(self, url: str) -> str | None:
        """Its address of ``url`` (one of its pages' form), or None when ``url`` is not an address of its."""


_offline_web: list[OfflineWeb] = []


def register_offline_web(web: OfflineWeb) -> None:
    """Read ``web`` instead of the internet when ``DEMO_WEB`` is on (called from its app's ``AppConfig.ready``)."""
    _offline_web[:] = [web]


def offline_web() -> OfflineWeb | None:
    """The registered offline web, whether or not ``DEMO_WEB`` turns it on."""
    return _offline_web[0] if _offline_web else None


@dataclass(frozen=True, slots=True)
class WebSetup:
    """How ``web_search`` and ``web_fetch`` reach the web here: their limits, and whether it is the demo web."""

    config: WebConfig
    offline: OfflineWeb | None
    """The demo web: both tools read the pages the project ships, offline (``DEMO_WEB``)."""

    @property
    def demo(self) -> bool:
        return self.offline is not None

    def tools(self) -> ToolFactory:
        return self.offline.tools(self.config) if self.offline is not None else web_tools(self.config)

    @property
    def search(self) -> bool:
        return self.demo or bool(self.config.search_url)

    @property
    def fetch(self) -> bool:
        return self.demo or self.config.fetch


def web_config() -> WebSetup | None:
    """The web tools' configuration, or None when neither web_search nor web_fetch is on."""
    config = WebConfig(
        search_url=settings.WEB_SEARCH_URL,
        fetch=settings.WEB_FETCH_ENABLED,
        allowed_hosts=frozenset(settings.WEB_FETCH_ALLOWED_HOSTS),
        timeout=settings.WEB_TIMEOUT_SECONDS,
        max_bytes=int(settings.WEB_FETCH_MAX_MB * 1024 * 1024),
    )
    offline = offline_web() if settings.DEMO_WEB else None
    if offline is not None:
        return WebSetup(config, offline)
    return WebSetup(config, None) if config.enabled else None


def web_status() -> dict[str, object]:
    """For the settings page: which web tools are on, and where they search and read."""
    setup = web_config()
    if setup is None:
        return {"on": False, "demo": False, "search": False, "fetch": False}
    return {
        "on": True,
        "demo": setup.demo,
        "pages": setup.offline.page_count() if setup.offline is not None else 0,
        "search": setup.search,
        "search_host": "" if setup.demo else urlsplit(setup.config.search_url).netloc,
        "fetch": setup.fetch,
        "allowed_hosts": sorted(setup.config.allowed_hosts),
    }
