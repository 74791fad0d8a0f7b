from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "assistant.runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from . import queue  # noqa: F401  (a run's end sends its conversation's next queued message)
