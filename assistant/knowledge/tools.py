"""The web and code tools as this server is configured (settings ``WEB_*``, ``DEMO_WEB`` and ``RUN_CODE_*``).

``tool_factories`` feeds a run's ``Toolbox``; ``available_resources`` tells the composer which of
``web`` and ``code`` it may offer.
"""

from __future__ import annotations

from django.conf import settings

from assistant.engine.query import QueryLimits
from assistant.engine.run_code import KnowledgeExport, code_tools
from assistant.engine.sandbox import CodeLimits, Sandbox
from assistant.engine.sandbox_probe import detect
from assistant.engine.tables import TableBackend, TableCatalogue, table_tools
from assistant.engine.tools import ToolFactory
from assistant.orgs.web import web_config

__all__ = ["available_resources", "demo_web_on", "query_limits", "sandbox", "tool_factories", "web_config"]


def demo_web_on() -> bool:
    """Whether the web tools read the demo web (the offline pages the project ships) on this server."""
    setup = web_config()
    return setup is not None and setup.demo


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
        concurrent=settings.RUN_CODE_CONCURRENT,
    )
    return Sandbox(limits, isolation)


def query_limits() -> QueryLimits:
    return QueryLimits(
        max_rows=settings.DATA_QUERY_MAX_ROWS,
        seconds=settings.DATA_QUERY_SECONDS,
        memory_mb=settings.DATA_QUERY_MEMORY_MB,
        concurrent=settings.DATA_QUERY_CONCURRENT,
    )


def tool_factories(
    knowledge: KnowledgeExport | None, tables: tuple[TableBackend, TableCatalogue] | None = None
) -> list[ToolFactory]:
    """The factories of a run's toolbox: web tools for scopes with ``web``, run_code for scopes with ``code``,
    data_tables and data_query for scopes whose knowledge bases hold tables (``tables``: where they are read,
    and which bases held some when the toolbox was made)."""
    factories: list[ToolFactory] = []
    if tables is not None:
        factories.append(table_tools(tables[0], tables[1], query_limits()))
    web = web_config()
    if web is not None:
        factories.append(web.tools())
    box = sandbox()
    if box is not None:
        factories.append(code_tools(box, knowledge))
    return factories


def available_resources() -> dict[str, bool]:
    """Whether ``web`` and ``code`` can be offered on this server: ``{"web": bool, "code": bool}``."""
    return {"web": web_config() is not None, "code": sandbox() is not None}
