from django.urls import path

from . import views

urlpatterns = [
    path("", views.settings_page, name="org_settings"),
    path("models", views.save_models, name="org_models"),
    path("levels", views.save_levels, name="org_levels"),
    path("profiles/new", views.profile_new, name="profile_new"),
    path("profiles/<int:pk>/", views.profile_edit, name="profile_edit"),
    path("profiles/<int:pk>/delete", views.profile_delete, name="profile_delete"),
]
