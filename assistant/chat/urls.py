from django.urls import path

from . import panels, sources, turns, views

urlpatterns = [
    path("", views.home, name="home"),
    path("c/new", views.send, name="send_new"),
    path("c/search", turns.search, name="conversation_search"),
    path("c/documents", views.find_documents, name="composer_documents"),
    path("c/<int:pk>/", views.conversation, name="conversation"),
    path("c/<int:pk>/send", views.send, name="send"),
    path("c/<int:pk>/rename", views.rename, name="conversation_rename"),
    path("c/<int:pk>/delete", views.delete, name="conversation_delete"),
    path("c/<int:pk>/export.<str:fmt>", turns.export, name="conversation_export"),
    path("c/<int:pk>/queued/<int:message_id>/remove", turns.queued_remove, name="queued_remove"),
    path("c/<int:pk>/turns/<uuid:run_id>/edit", turns.edit, name="turn_edit"),
    path("c/<int:pk>/turns/<uuid:run_id>/regenerate", turns.regenerate, name="turn_regenerate"),
    path("documents/<int:pk>/", sources.document, name="source_document"),
    path("documents/<int:pk>/part", sources.document_part, name="source_document_part"),
    path("documents/<int:pk>/download", sources.download, name="source_download"),
    path("runs/<uuid:run_id>/stop", views.stop, name="stop"),
    path("runs/<uuid:run_id>/agents/<str:agent_id>/stop", views.agent_stop, name="agent_stop"),
    path("c/<int:pk>/runs/<uuid:run_id>/delegation", views.delegation_answer, name="delegation_answer"),
    path("c/<int:pk>/runs/<uuid:run_id>/agents/<str:agent_id>/", panels.agent_panel, name="agent_panel"),
]
