"""Loading ``data/models.json`` into the catalogue: USD list prices converted to EUR at the file's rate.

Loading is idempotent: entries already in the database are left as the admins edited them,
unless ``refresh`` asks to overwrite them from the file.
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.db import transaction

from assistant.engine.catalogue import ModelInfo

from . import providers
from .models import CHAT_COMPLETIONS, DEMO_PROVIDER, CatalogueEntry

DATA_FILE = Path(__file__).resolve().parent / "data" / "models.json"
DEMO_PRICE_DATE = datetime.date(2025, 12, 1)


def entries_from_file(path: Path = DATA_FILE) -> list[dict[str, Any]]:
    """The field values of every entry in the file, prices in EUR."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rate = Decimal(str(data["usd_to_eur"]["rate"]))
    conversion = (
        f"converted at 1 EUR = {1 / rate:.2f} USD ({data['usd_to_eur']['source']}, {data['usd_to_eur']['date']})"
    )
    entries = []
    for position, m in enumerate(data["models"], start=1):
        usd = m["list_price_usd"]
        eur = {k: (Decimal(str(v)) * rate).quantize(Decimal("0.000001")) for k, v in usd.items()}
        note = (
            f"List price in USD per million tokens: input {usd['input']}, cached input {usd['cached_input']}, "
            f"output {usd['output']}; {conversion}."
        )
        if m.get("note"):
            note += " " + m["note"]
        carbon = {**data["providers"][m["provider"]], **m["carbon"]}
        carbon["source"] = f"{m['carbon'].get('source', '')}; PUE/WUE: {data['providers'][m['provider']]['source']}"
        entries.append(
            {
                "model_id": m["id"],
                "provider": m["provider"],
                "api_model": m["api_model"],
                "display_name": m["display_name"],
                "input_price": eur["input"],
                "cached_input_price": eur["cached_input"],
                "output_price": eur["output"],
                "price_date": datetime.date.fromisoformat(m["price_date"]),
                "price_source": m["price_source"],
                "price_note": note,
                "context_window": m["context_window"],
                "output_cap": m["output_cap"],
                "api": m.get("api", CHAT_COMPLETIONS),
                "reasoning": m["reasoning"],
                "reasoning_efforts": m["reasoning_efforts"],
                "supports_tools": m["supports_tools"],
                "carbon": carbon,
                "position": position,
            }
        )
    return entries


def infos_from_file(path: Path = DATA_FILE) -> list[ModelInfo]:
    """The engine's view of the file's entries, without the database (tests, benchmarks)."""
    return [CatalogueEntry(**fields).to_info() for fields in entries_from_file(path)]


def demo_entries() -> list[dict[str, Any]]:
    """The offline demo models as catalogue entries: an admin may then offer them next to real models (none when
    no demo provider is registered)."""
    demo = providers.provider(DEMO_PROVIDER)
    return [
        {
            "model_id": m.id,
            "provider": DEMO_PROVIDER,
            "api_model": m.id,
            "display_name": m.display_name,
            "input_price": Decimal(str(m.input_price)),
            "cached_input_price": Decimal(str(m.cached_input_price)),
            "output_price": Decimal(str(m.output_price)),
            "price_date": DEMO_PRICE_DATE,
            "price_source": "The offline demo provider (assistant/demo/): nothing is paid.",
            "price_note": "Made-up prices, so that the demo shows costs and which model is cheaper.",
            "context_window": m.context_window,
            "output_cap": m.output_cap,
            "reasoning": "adjustable" if m.reasoning_efforts else "none",
            "reasoning_efforts": list(m.reasoning_efforts),
            "supports_tools": m.supports_tools,
            "carbon": demo_carbon(m),
            "position": 1000 + position,
        }
        for position, m in enumerate(demo.models if demo else ())
    ]


def demo_carbon(m: ModelInfo) -> dict[str, Any]:
    """A demo model's carbon parameters (a real model's of its size), with where they come from."""
    real_id, real_name = providers.carbon_as()[m.id]
    source = (
        f"The offline demo's estimate: the parameters of {real_name} ({real_id} in this catalogue: EcoLogits 0.11.3)"
    )
    return {**m.carbon, "source": source}


def add_demo_entries(*, offered_with_real_providers: bool = False) -> None:
    """The demo models' entries that are missing (the others keep what admins set)."""
    for fields in demo_entries():
        model_id = fields.pop("model_id")
        CatalogueEntry.objects.get_or_create(
            model_id=model_id, defaults={**fields, "offered_with_real_providers": offered_with_real_providers}
        )


def load_catalogue(path: Path = DATA_FILE, *, refresh: bool = False) -> tuple[int, int]:
    """Add the file's missing entries (and overwrite the others when ``refresh``); return (added, updated).

    The offline demo models get their entries too (added when missing, never overwritten).
    """
    added = updated = 0
    with transaction.atomic():
        add_demo_entries()
        for fields in entries_from_file(path):
            model_id = fields.pop("model_id")
            entry = CatalogueEntry.objects.filter(model_id=model_id).first()
            if entry is None:
                entry = CatalogueEntry(model_id=model_id, **fields)
                entry.full_clean()
                entry.save()
                added += 1
            elif refresh:
                for name, value in fields.items():
                    setattr(entry, name, value)
                entry.full_clean()
                entry.save()
                updated += 1
    return added, updated
