from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    name = "assistant.catalogue"
    verbose_name = "Model catalogue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (an edited entry reaches the model picker at once)
