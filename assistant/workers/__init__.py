"""Where runs execute: their leases, how Stop reaches them, and the Celery workers that scale them out.

``leases`` is used wherever a run executes (the web server's event loop in the embedded default, a
worker when scaled out); ``celery``, ``runner`` and ``tasks`` are the worker side.
"""
