from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "assistant.runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        # A run's end sends its conversation's next queued message.
        from . import ends, queue

        ends.run_finished.connect(queue.on_run_finished, dispatch_uid="runs.queue.on_run_finished")
