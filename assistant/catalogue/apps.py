from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    name = "assistant.catalogue"
    verbose_name = "Model catalogue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            providers,
            signals,  # noqa: F401  (an edited entry reaches the model picker at once)
        )

        providers.register(providers.OpenAI("openai", "OPENAI_API_KEY", "OPENAI_BASE_URL"))
        providers.register(providers.Mistral("mistral", "MISTRAL_API_KEY", "MISTRAL_BASE_URL"))
