from django.urls import path

from . import views

urlpatterns = [
    path("", views.bases, name="kb_bases"),
    path("<slug:slug>/", views.base, name="kb_base"),
    path("<slug:slug>/documents/<int:pk>/delete", views.delete, name="kb_delete"),
]
