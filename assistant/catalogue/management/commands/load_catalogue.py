"""Load the model catalogue from data/models.json. Idempotent: edited entries are kept unless --refresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from assistant.catalogue.loading import DATA_FILE, load_catalogue


class Command(BaseCommand):
    help = "Add the catalogue entries of data/models.json that are missing (--refresh overwrites the others)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", type=Path, default=DATA_FILE, help="Another data file.")
        parser.add_argument("--refresh", action="store_true", help="Overwrite existing entries from the file.")

    def handle(self, *args: Any, **options: Any) -> None:
        added, updated = load_catalogue(options["file"], refresh=options["refresh"])
        if options["verbosity"]:
            self.stdout.write(f"Model catalogue: {added} added, {updated} refreshed.")
