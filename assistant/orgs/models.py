"""Organisations and their members. Every object of the product belongs to one organisation."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Organisation(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    # None: the whole catalogue; else the list of model ids the assistant may use.
    allowed_models = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    ROLES = [("admin", "Admin"), ("member", "Member")]

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=ROLES, default="member")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organisation", "user"], name="one_membership_per_org")]

    def __str__(self) -> str:
        return f"{self.user} in {self.organisation} ({self.role})"
