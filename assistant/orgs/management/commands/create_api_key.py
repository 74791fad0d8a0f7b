"""Create an API key for an organisation and print it, once: only its digest is stored."""

from __future__ import annotations

import zoneinfo
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from assistant.catalogue import snapshot
from assistant.orgs import keys
from assistant.orgs.models import MAX_MONTHLY_EUR, Organisation


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
        parser.add_argument(
            "--monthly-eur",
            metavar="X",
            help="The key's spend limit per calendar month (organisation's time zone) in EUR: a hard cap.",
        )
        parser.add_argument(
            "--alert-only",
            action="store_true",
            help="With --monthly-eur: alert the admins at 80 %% and 100 %% instead of refusing requests.",
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
        monthly_eur = None
        if options["monthly_eur"] is not None:
            try:
                monthly_eur = Decimal(options["monthly_eur"])
                if monthly_eur.is_finite():
                    monthly_eur = monthly_eur.quantize(Decimal("0.01"))
            except InvalidOperation as e:
                raise CommandError(f"--monthly-eur takes an amount in EUR, e.g. 50 or 12.5: {e}.") from e
            if not monthly_eur.is_finite() or not Decimal("0.01") <= monthly_eur <= MAX_MONTHLY_EUR:
                raise CommandError(f"--monthly-eur: from 0.01 to {MAX_MONTHLY_EUR} EUR.")
        elif options["alert_only"]:
            raise CommandError("--alert-only goes with --monthly-eur.")
        key, secret = keys.create_key(
            org,
            options["name"],
            models,
            expires=expires,
            rate_limit=rate_limit,
            monthly_eur=monthly_eur,
            hard_cap=not options["alert_only"],
        )
        scope = ", ".join(models) if models is not None else "the whole catalogue"
        if monthly_eur is not None:
            scope += f"; {monthly_eur} EUR a month, {'an alert' if options['alert_only'] else 'a hard cap'}"
        self.stderr.write(f"Key '{key.name}' of {org.slug} ({scope}). It is shown once; keep it secret:")
        self.stdout.write(secret)
