"""A run's lease: which process executes it, and when that process last said it was alive."""

from __future__ import annotations

from django.db import models


class Lease(models.Model):
    """Taken once by the process that executes a run, renewed while the run goes on.

    One row per run (the primary key is the run): a run delivered twice by a queue is executed once.
    """

    run = models.OneToOneField("chat.Run", primary_key=True, on_delete=models.CASCADE, related_name="lease")
    executor = models.CharField(max_length=200, help_text="host:pid of the process executing the run")
    claimed = models.DateTimeField(auto_now_add=True)
    heartbeat = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.run_id} on {self.executor}"
