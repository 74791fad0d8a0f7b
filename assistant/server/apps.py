from django.apps import AppConfig


class ServerConfig(AppConfig):
    name = "assistant.server"
    label = "server"
    verbose_name = "Web server"
