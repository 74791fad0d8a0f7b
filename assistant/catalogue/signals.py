"""An edited, added or deleted catalogue entry drops the cached catalogue, so it shows at once."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from . import snapshot
from .models import CatalogueEntry


@receiver(post_save, sender=CatalogueEntry)
@receiver(post_delete, sender=CatalogueEntry)
def catalogue_changed(**kwargs: Any) -> None:
    snapshot.forget_catalogue()
