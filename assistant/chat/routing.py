from django.urls import path

from . import consumers

websocket_urlpatterns = [
    # Channels routes a consumer's ASGI application through Django's path(), whose stubs take only views.
    path("ws/c/<int:pk>/", consumers.ConversationConsumer.as_asgi()),  # type: ignore[arg-type]
]
