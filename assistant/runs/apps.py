from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "assistant.runs"
    verbose_name = "Runs"
