from django.urls import path

from . import views

urlpatterns = [
    path("", views.bases, name="kb_bases"),
    path("new", views.base_new, name="kb_new"),
    path("<slug:slug>/", views.base, name="kb_base"),
    path("<slug:slug>/edit", views.base_edit, name="kb_edit"),
    path("<slug:slug>/delete", views.base_delete, name="kb_base_delete"),
    path("<slug:slug>/documents", views.documents, name="kb_documents"),
    path("<slug:slug>/documents/<int:pk>/delete", views.delete, name="kb_delete"),
]
