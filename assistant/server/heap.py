"""The objects a process made while it started, kept out of the garbage collector's full collections.

A started server or worker holds about 250,000 objects that live as long as it does (modules, classes, Django's
apps, URL patterns and templates, the SDKs' pydantic models). Python's oldest-generation collection walks every one
of them each time it runs: 120–140 ms of CPU on the server, about once every 50 runs, landing in whichever request
is running then (docs/BENCHMARKS.md, issue 31). ``gc.freeze()`` moves them to a permanent generation that
collections skip: one then walks the objects made since (about 30,000: 20 ms). What is frozen is never freed; it was
not going to be.
"""

from __future__ import annotations

import gc


def freeze_startup() -> None:
    """Collect once what starting left behind, then freeze every object alive: call it once the process has loaded
    what it serves (the ASGI application, the Celery app and its tasks), before it serves."""
    gc.collect()
    gc.freeze()


__all__ = ["freeze_startup"]
