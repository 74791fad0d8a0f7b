"""Names an organisation's data holds in several languages (the demo's bases and categories), shown in the
reader's: ``translations`` maps a language to its words (``{"fr": {"name": "Factures"}}``); a field without
words in the reader's language, as anything a user typed, is shown as written. Renaming drops that field's
other words, which no longer say the same thing."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, ClassVar

from django.db import models
from django.db.models import Q
from django.utils.translation import get_language


def reader_language() -> str:
    """The reader's language (the active one), as ``translations`` keys it: ``fr``, ``en``."""
    return (get_language() or "en").split("-")[0]


class Translated(models.Model):
    translated_fields: ClassVar[tuple[str, ...]] = ("name",)

    translations = models.JSONField(
        default=dict,
        blank=True,
        help_text="Its words in other languages, e.g. {'fr': {'name': 'Factures'}}; without, shown as written.",
    )

    class Meta:
        abstract = True

    def shown(self, field: str) -> str:
        """``field`` in the reader's language (the active one), else as written."""
        language = reader_language()
        words = self.translations.get(language) if isinstance(self.translations, dict) else None
        value = words.get(field) if isinstance(words, dict) else None
        return str(value) if value else str(getattr(self, field))

    @classmethod
    def shown_contains(cls, field: str, text: str) -> Q:
        """The rows whose ``field``, as the reader is shown it (``shown``), contains ``text`` (case-insensitive): its
        words in the reader's language, or as written when it has none in that language."""
        words = f"translations__{reader_language()}__{field}"
        translated = Q(**{f"{words}__isnull": False}) & ~Q(**{words: ""})
        return Q(**{f"{words}__icontains": text}) | (~translated & Q(**{f"{field}__icontains": text}))

    @property
    def shown_name(self) -> str:
        return self.shown("name")

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> Any:
        instance = super().from_db(db, field_names, values)
        instance._as_loaded = {f: getattr(instance, f) for f in cls.translated_fields if f in field_names}
        return instance

    def save(self, *args: Any, **kwargs: Any) -> None:
        loaded: dict[str, Any] = getattr(self, "_as_loaded", {})
        renamed = {f for f, value in loaded.items() if getattr(self, f) != value}
        if renamed and isinstance(self.translations, dict):
            self.translations = {
                language: {f: w for f, w in words.items() if f not in renamed}
                for language, words in self.translations.items()
                if isinstance(words, dict)
            }
        super().save(*args, **kwargs)
        self._as_loaded = {f: getattr(self, f) for f in self.translated_fields}


class ReaderWords:
    """For a ModelForm over a ``Translated`` model: its translated fields start with the reader's words (a French
    admin edits «Factures», not "Invoices"). Sent back unchanged, the data stays as it was, its other languages'
    words too; changed, the new words are the name as written (``Translated.save`` drops the field's other words).

    Put it before ``forms.ModelForm`` in the bases."""

    instance: Any  # the ModelForm's: a Translated model (Any, so that each form keeps its model's type)
    initial: MutableMapping[str, Any]
    fields: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reader_words: dict[str, str] = {}
        if self.instance.pk is None:
            return
        for field in self.instance.translated_fields:
            if field in self.fields and self.instance.shown(field) != getattr(self.instance, field):
                self._reader_words[field] = self.initial[field] = self.instance.shown(field)

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}  # type: ignore[misc]  # ModelForm.clean, after this class in the bases
        for field, shown in self._reader_words.items():
            if field in data and " ".join(str(data[field]).split()) == " ".join(shown.split()):
                data[field] = getattr(self.instance, field)
        return data
