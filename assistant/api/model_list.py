"""``GET /v1/models`` and ``GET /v1/models/{id}``: the models a key may use, with their prices and limits."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpRequest
from ninja import Router

from assistant.catalogue import snapshot
from assistant.catalogue.models import CatalogueEntry
from assistant.orgs.models import ApiKey
from assistant.orgs.services import policy_for

from .auth import key_of
from .errors import ApiError
from .response_schemas import (
    ModelList,
    ModelOut,
    errors_schema,
)

router = Router()


def _created(model_ids: list[str]) -> dict[str, int]:
    """When each model was added to this server's catalogue (Unix seconds): its entry's ``created``; a shipped
    model with no entry (an offline demo model) has been in it since the catalogue was made (its first migration)."""
    found = dict(CatalogueEntry.objects.filter(model_id__in=model_ids).values_list("model_id", "created"))
    if len(found) < len(model_ids):
        first = MigrationRecorder.Migration.objects.filter(app="catalogue").order_by("applied").first()
        since = first.applied if first is not None else None
        found.update({i: since for i in model_ids if i not in found and since is not None})
    return {i: int(when.timestamp()) for i, when in found.items()}


def _models(key: ApiKey) -> list[ModelOut]:
    catalogue = snapshot.catalogue()
    allowed = policy_for(key.organisation, key).allowed_ids(catalogue)
    created = _created(list(allowed))
    return [
        ModelOut(
            id=m.id,
            created=created.get(m.id, 0),
            owned_by=m.provider,
            name=m.label,
            input_price_eur=m.input_price,
            cached_input_price_eur=m.cached_input_price,
            output_price_eur=m.output_price,
            price_date=m.price_date.isoformat() if m.price_date else None,
            context_window=m.context_window,
            output_cap=m.output_cap,
            reasoning_efforts=list(m.reasoning_efforts),
        )
        for m in (catalogue[i] for i in allowed)
    ]


@router.get("/models", response={200: ModelList, **errors_schema(401, 429)}, summary="The models this key may use")
async def list_models(request: HttpRequest) -> ModelList:
    return ModelList(data=await sync_to_async(_models)(key_of(request)))


@router.get(
    "/models/{model_id}", response={200: ModelOut, **errors_schema(401, 404, 429)}, summary="One model this key may use"
)
async def retrieve_model(request: HttpRequest, model_id: str) -> ModelOut:
    for model in await sync_to_async(_models)(key_of(request)):
        if model.id == model_id:
            return model
    raise ApiError(
        404, "model_not_found", f"The model '{model_id}' does not exist or this key may not use it.", param="model"
    )
