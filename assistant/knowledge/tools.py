"""The web and code tools as this server is configured (settings ``WEB_*`` and ``RUN_CODE_*``).

``tool_factories`` feeds a run's ``Toolbox``; ``available_resources`` tells the composer which of
``web`` and ``code`` it may offer.
"""

from __future__ import annotations

from django.conf import settings

from assistant.engine.sandbox import CodeLimits, KnowledgeExport, Sandbox, code_tools, detect
from assistant.engine.tools import ToolFactory
from assistant.engine.web import WebConfig, web_tools


def web_config() -> WebConfig | None:
    """The web tools' configuration, or None when neither web_search nor web_fetch is enabled."""
    config = WebConfig(
        search_url=settings.WEB_SEARCH_URL,
        fetch=settings.WEB_FETCH_ENABLED,
        allowed_hosts=frozenset(settings.WEB_FETCH_ALLOWED_HOSTS),
        timeout=settings.WEB_TIMEOUT_SECONDS,
        max_bytes=int(settings.WEB_FETCH_MAX_MB * 1024 * 1024),
    )
    return config if config.enabled else None


def sandbox() -> Sandbox | None:
    """The run_code sandbox, or None when run_code is disabled or no child can be isolated here."""
    if not settings.RUN_CODE_ENABLED:
        return None
    isolation = detect()
    if isolation is None or not isolation.complete:  # a layer missing: no run_code (code_status says which)
        return None
    limits = CodeLimits(
        cpu_seconds=settings.RUN_CODE_CPU_SECONDS,
        wall_seconds=settings.RUN_CODE_WALL_SECONDS,
        memory_mb=settings.RUN_CODE_MEMORY_MB,
    )
    return Sandbox(limits, isolation)


def tool_factories(knowledge: KnowledgeExport | None) -> list[ToolFactory]:
    """The factories of a run's toolbox: web tools for scopes with ``web``, run_code for scopes with ``code``."""
    factories: list[ToolFactory] = []
    config = web_config()
    if config is not None:
        factories.append(web_tools(config))
    box = sandbox()
    if box is not None:
        factories.append(code_tools(box, knowledge))
    return factories


def available_resources() -> dict[str, bool]:
    """Whether ``web`` and ``code`` can be offered on this server: ``{"web": bool, "code": bool}``."""
    return {"web": web_config() is not None, "code": sandbox() is not None}
