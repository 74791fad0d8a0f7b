from django.contrib import admin

from .models import Membership, Organisation


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug"]
    inlines = [MembershipInline]
