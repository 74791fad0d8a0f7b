"""The demo models' entries get the carbon parameters of a real model of their size, where they have none.

Frozen here (a migration does not follow the code): demo-large as Mistral Large 3, demo-small as Mistral
Small 4, as ``assistant/demo/model/info.py`` and the shipped catalogue carry them. An entry whose
carbon an admin filled in is left alone.
"""

from typing import Any

from django.db import migrations

MISTRAL = {"pue": 1.16, "wue": 0.09}
CARBON: dict[str, dict[str, Any]] = {
    "demo-large": {
        "total_params_min": 675,
        "total_params_max": 675,
        "active_params_min": 41,
        "active_params_max": 41,
        "tps": 59.2,
        "ttft": 0.63,
        **MISTRAL,
        "source": "The offline demo's estimate: the parameters of Mistral Large 3 (mistral-large in this catalogue: "
        "EcoLogits 0.11.3)",
    },
    "demo-small": {
        "total_params_min": 119,
        "total_params_max": 119,
        "active_params_min": 8,
        "active_params_max": 8,
        **MISTRAL,
        "source": "The offline demo's estimate: the parameters of Mistral Small 4 (mistral-small in this catalogue: "
        "EcoLogits 0.11.3)",
    },
}


def forwards(apps: Any, schema_editor: Any) -> None:
    entry = apps.get_model("catalogue", "CatalogueEntry")
    for row in entry.objects.filter(provider="demo", model_id__in=list(CARBON)):
        if not row.carbon:
            row.carbon = CARBON[row.model_id]
            row.save(update_fields=["carbon"])


class Migration(migrations.Migration):
    dependencies = [("catalogue", "0002_demo_models_offered")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
