"""The Celery task of an upload's extraction, scaled out (``RUNS_EXECUTOR=celery``): see ``processing``.

The worker reads the file through Django's storage, so web servers and workers share a ``MEDIA_ROOT``
(or an object store), not a local path.
"""

from __future__ import annotations

from assistant.workers.celery import app

from . import processing


@app.task(name="knowledge.extract")
def extract_document(document_id: int) -> None:
    try:
        processing.process(document_id)
    except Exception:
        processing.fail([document_id], processing.CRASHED, {"exit": None})
        raise
