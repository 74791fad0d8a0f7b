from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import path, re_path

from . import consumers


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """Any other websocket path (``/ws/c/abc/``, ``/ws/x``): accepted, then closed with 4404, the code of a
    conversation that does not exist, rather than a failed handshake (a 500 in the router)."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=consumers.CLOSE_NOT_FOUND)


websocket_urlpatterns = [
    # Channels routes a consumer's ASGI application through Django's path(), whose stubs take only views.
    path("ws/c/<int:pk>/", consumers.ConversationConsumer.as_asgi()),  # type: ignore[arg-type]  # Channels routes a consumer through Django's path(), whose stubs take only views
    re_path(r"", UnknownPathConsumer.as_asgi()),  # type: ignore[arg-type]  # Channels routes a consumer through Django's path(), whose stubs take only views
]
