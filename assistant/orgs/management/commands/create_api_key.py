"""Create an API key for an organisation and print it, once: only its digest is stored."""

from __future__ import annotations

import zoneinfo
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

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
        parser.add_argument(
            "--expires", metavar="YYYY-MM-DD", help="The last day the key works (in the organisation's time zone)."
        )
        parser.add_argument(
            "--rate-limit", type=int, metavar="N", help="Requests per minute (default: API_KEY_RATE_LIMIT)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        org = Organisation.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"No organisation '{options['org']}'.")
        models: list[str] | None = options["models"]
        if models is not None:
            unknown = [m for m in models if m not in snapshot.catalogue()]
            if unknown:
                raise CommandError(f"Not in the catalogue: {', '.join(unknown)}.")
        expires = None
        if options["expires"]:
            try:
                day = date.fromisoformat(options["expires"])
            except ValueError as e:
                raise CommandError(f"--expires takes a date, YYYY-MM-DD: {e}.") from e
            if day < timezone.now().astimezone(zoneinfo.ZoneInfo(org.time_zone)).date():
                raise CommandError("--expires: choose today or a later day.")
            expires = keys.end_of(day, org.time_zone)
        rate_limit: int | None = options["rate_limit"]
        if rate_limit is not None and rate_limit < 1:
            raise CommandError("--rate-limit: at least 1 request per minute.")
        key, secret = keys.create_key(org, options["name"], models, expires=expires, rate_limit=rate_limit)
        scope = ", ".join(models) if models is not None else "the whole catalogue"
        self.stderr.write(f"Key '{key.name}' of {org.slug} ({scope}). It is shown once; keep it secret:")
        self.stdout.write(secret)
