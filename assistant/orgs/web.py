"""The web tools as this server is configured (settings ``WEB_*`` and ``DEMO_WEB``), and what the settings page
says of them.

``web_config`` is the one reading of those settings: ``knowledge.tools`` builds the run's web tools from it, the
settings page words it (``web_status``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from assistant.engine.demoweb import demo_web
from assistant.engine.web import WebConfig


@dataclass(frozen=True, slots=True)
class WebSetup:
    """How ``web_search`` and ``web_fetch`` reach the web here: their limits, and whether it is the demo web."""

    config: WebConfig
    demo: bool
    """The demo web: both tools read the pages the project ships, offline (``DEMO_WEB``)."""

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
    if settings.DEMO_WEB:
        return WebSetup(config, demo=True)
    return WebSetup(config, demo=False) if config.enabled else None


def web_status() -> dict[str, object]:
    """For the settings page: which web tools are on, and where they search and read."""
    setup = web_config()
    if setup is None:
        return {"on": False, "demo": False, "search": False, "fetch": False}
    return {
        "on": True,
        "demo": setup.demo,
        "pages": len(demo_web()) if setup.demo else 0,
        "search": setup.search,
        "search_host": "" if setup.demo else urlsplit(setup.config.search_url).netloc,
        "fetch": setup.fetch,
        "allowed_hosts": sorted(setup.config.allowed_hosts),
    }
