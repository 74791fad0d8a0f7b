from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "assistant.demo"
    verbose_name = "Offline demo"

    def ready(self) -> None:
        # The catalogue offers the demo models and the web tools read the demo web through what is registered here:
        # neither app imports this one.
        from assistant.catalogue import providers
        from assistant.orgs.web import register_offline_web

        from .provider import DemoProvider, DemoWebOffline

        providers.register(DemoProvider())
        register_offline_web(DemoWebOffline())
