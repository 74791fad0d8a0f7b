"""Traces and metrics out, in the OpenTelemetry GenAI semantic conventions (docs/OBSERVABILITY.md).

``setup`` builds the SDK's providers and OTLP exporters from the standard ``OTEL_*`` variables, once per process
(the web server's ``asgi``, each Celery worker's start): without ``OTEL_EXPORTER_OTLP_ENDPOINT`` nothing is set up
and ``setup.current()`` is None. ``spans.RunTrace`` builds a run's span tree from its events, live, the one place
spans are made; ``instruments`` holds the metrics; ``content`` reads whether message content may leave the server.
No Django here: the apps hand in what a run's spans say (its organisation, category, conversation).
"""
