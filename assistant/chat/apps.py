from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "assistant.chat"
    verbose_name = "Chat"
