"""``manage.py runserver``: Daphne's, serving with our ``Server`` (this app comes before ``daphne``)."""

from __future__ import annotations

from daphne.management.commands.runserver import Command as DaphneCommand

from assistant.server.server import Server


class Command(DaphneCommand):  # type: ignore[misc]  # Daphne ships no types: its class is Any
    server_cls = Server
