from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "assistant.workers"
    verbose_name = "Run execution"
