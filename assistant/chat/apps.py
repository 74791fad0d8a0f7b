from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "assistant.chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from . import deletion  # noqa: F401  (its receivers erase what a stopped run writes after a delete)
