from django.apps import AppConfig


class OrgsConfig(AppConfig):
    name = "assistant.orgs"
    verbose_name = "Organisations"
