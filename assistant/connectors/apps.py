from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "assistant.connectors"
    verbose_name = "Connectors"
