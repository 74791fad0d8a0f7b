"""The knowledge-base form of an organisation's admins: name, slug (new bases only), description."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.text import slugify
from django.utils.translation import gettext_lazy as _

from assistant.orgs.models import Organisation
from assistant.orgs.translated import ReaderWords

from .models import KnowledgeBase

SLUG_MAX = KnowledgeBase._meta.get_field("slug").max_length or 50


class KnowledgeBaseForm(ReaderWords, forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: Django's ModelForm is not subscriptable at runtime
    """A new base gets a slug (suggested from its name when left empty); an existing base keeps its slug.

    The slug names the base in requests (``kb:<slug>``), scheduled tasks and saved conversations, so
    it never changes once the base exists; it is unique within the organisation.
    """

    class Meta:
        model = KnowledgeBase
        fields = ["name", "slug", "description"]
        labels = {"name": _("Name"), "slug": _("Slug"), "description": _("Description")}
        help_texts = {
            "slug": _(
                "How requests name the base (kb:<slug>): lowercase letters, digits and hyphens. "
                "Left empty, it is made from the name. It cannot be changed later."
            ),
            "description": _("Shown to the users and to the assistant, so it knows what the base holds."),
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 4})}
        error_messages = {"name": {"required": _("Give the base a name.")}}

    def __init__(self, *args: Any, organisation: Organisation, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.organisation = organisation
        self.instance.organisation = organisation
        if self.instance.pk is not None:
            del self.fields["slug"]
        else:
            self.fields["slug"].required = False

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "slug" not in self.fields or self.has_error("name") or self.has_error("slug"):
            return data
        slug = data.get("slug") or slugify(data.get("name", ""))[:SLUG_MAX].strip("-")
        if not slug:
            self.add_error("slug", _("No slug can be made from this name: give one (letters, digits and hyphens)."))
            return data
        data["slug"] = slug
        if KnowledgeBase.objects.filter(organisation=self.organisation, slug=slug).exists():
            self.add_error("slug", slug_taken(slug))
        return data


def slug_taken(slug: str) -> str:
    return str(_("Your organisation already has a knowledge base with the slug “%(slug)s”: choose another one.")) % {
        "slug": slug
    }
