from django.urls import path

from . import views

urlpatterns = [
    path("", views.settings_page, name="org_settings"),
    path("models", views.save_models, name="org_models"),
    path("levels", views.save_levels, name="org_levels"),
    path("profiles/new", views.profile_new, name="profile_new"),
    path("profiles/<int:pk>/", views.profile_edit, name="profile_edit"),
    path("profiles/<int:pk>/delete", views.profile_delete, name="profile_delete"),
    path("members/", views.members, name="org_members"),
    path("members/default", views.members_default, name="org_members_default"),
    path("members/<int:pk>/limit", views.member_limit, name="org_member_limit"),
    path("api-keys/", views.api_keys, name="api_keys"),
    path("api-keys/new", views.api_key_new, name="api_key_new"),
    path("api-keys/<int:pk>/revoke", views.api_key_revoke, name="api_key_revoke"),
    path("api-keys/<int:pk>/rotate", views.api_key_rotate, name="api_key_rotate"),
    path("audit/", views.audit_log, name="audit_log"),
]
