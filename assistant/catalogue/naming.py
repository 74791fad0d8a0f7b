"""A model's name as the pages show it, in the reader's language: a demo model says it is one."""

from __future__ import annotations

from django.utils.translation import gettext as _

from assistant.engine.catalogue import DEMO_LABEL

_SUFFIX = DEMO_LABEL.removeprefix("{name}")


def model_label(label: str) -> str:
    """A model's label (``ModelInfo.label``, or an agent's saved ``model_label``) in the reader's language."""
    if label.endswith(_SUFFIX):
        return _("%(name)s (offline demo)") % {"name": label.removesuffix(_SUFFIX)}
    return label
