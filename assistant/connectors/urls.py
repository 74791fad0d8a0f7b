from django.urls import path

from . import views

urlpatterns = [
    path("connectors/", views.connectors, name="connectors"),
    path("connectors/new", views.connector_new, name="connector_new"),
    path("connectors/<slug:name>/", views.connector_edit, name="connector_edit"),
    path("connectors/<slug:name>/delete", views.connector_delete, name="connector_delete"),
]
