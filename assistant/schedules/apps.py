from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "assistant.schedules"
    verbose_name = "Scheduled tasks"

    def ready(self) -> None:
        from . import signals  # noqa: F401
