from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "assistant.knowledge"
    verbose_name = "Knowledge bases"
