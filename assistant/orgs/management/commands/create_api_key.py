"""Create an API key for an organisation and print it, once: only its digest is stored."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.catalogue import snapshot
from assistant.orgs import keys
from assistant.orgs.models import Organisation


class Command(BaseCommand):
    help = "Create an API key for an organisation, optionally restricted to some models; the key is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="The organisation's slug.")
        parser.add_argument(
            "--models", nargs="+", metavar="ID", help="Model ids the key may use (default: the whole catalogue)."
        )
        parser.add_argument("--name", default="Command-line key", help="What the key is for.")

    def handle(self, *args: Any, **options: Any) -> None:
        org = Organisation.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"No organisation '{options['org']}'.")
        models: list[str] | None = options["models"]
        if models is not None:
            unknown = [m for m in models if m not in snapshot.catalogue()]
            if unknown:
                raise CommandError(f"Not in the catalogue: {', '.join(unknown)}.")
        key, secret = keys.create_key(org, options["name"], models)
        scope = ", ".join(models) if models is not None else "the whole catalogue"
        self.stderr.write(f"Key '{key.name}' of {org.slug} ({scope}). It is shown once; keep it secret:")
        self.stdout.write(secret)
