from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path("ws/c/<int:pk>/", consumers.ConversationConsumer.as_asgi()),
]
