"""``python -m assistant.server -b 0.0.0.0 -p 8000 assistant.asgi:application``: Daphne's command line (the same
options), serving with our ``Server``."""

from __future__ import annotations

from daphne.cli import CommandLineInterface

from .server import Server


class ServerCommandLine(CommandLineInterface):  # type: ignore[misc]  # Daphne ships no types: its class is Any
    server_class = Server


if __name__ == "__main__":
    ServerCommandLine.entrypoint()
