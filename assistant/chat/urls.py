from django.urls import path

from . import panels, views

urlpatterns = [
    path("", views.home, name="home"),
    path("c/new", views.send, name="send_new"),
    path("c/<int:pk>/", views.conversation, name="conversation"),
    path("c/<int:pk>/send", views.send, name="send"),
    path("c/<int:pk>/rename", views.rename, name="conversation_rename"),
    path("c/<int:pk>/delete", views.delete, name="conversation_delete"),
    path("runs/<uuid:run_id>/stop", views.stop, name="stop"),
    path("c/<int:pk>/runs/<uuid:run_id>/agents/<str:agent_id>/", panels.agent_panel, name="agent_panel"),
]
