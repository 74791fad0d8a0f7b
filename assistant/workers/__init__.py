"""The Celery glue that scales runs out: the Celery app (``celery``), its tasks (``tasks``: a run, a
scheduled task's execution) and each worker's event loop (``runner``).

A run's life itself (leases, Stop, the reaper) is the ``runs`` app's, the same wherever a run executes.
This app registers the ``celery`` executor with ``runs.execution`` (``apps``).
"""
