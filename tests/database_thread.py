"""What the database is asked, at the boundary: the statements sent from the thread where ``sync_to_async`` runs
database code (thread-sensitive: one thread for the whole event loop), as Django's ``CaptureQueriesContext`` records
them. Tests count statements there rather than replace the functions that send them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections
from django.test.utils import CaptureQueriesContext


@contextlib.asynccontextmanager
async def statements_of_the_database_thread() -> AsyncIterator[CaptureQueriesContext]:
    """Record the statements the database's thread sends meanwhile (``.captured_queries``, each with its ``sql``)."""

    def start() -> CaptureQueriesContext:
        context = CaptureQueriesContext(connections[DEFAULT_DB_ALIAS])  # that thread's own connection
        context.__enter__()
        return context

    context = await sync_to_async(start)()
    try:
        yield context
    finally:
        await sync_to_async(context.__exit__)(None, None, None)
