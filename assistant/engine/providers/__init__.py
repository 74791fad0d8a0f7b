"""Providers: each owns a client, its key and its base URL.

``models/<provider>.py`` maps the engine's requests to that provider's wire format and back;
``providers/<provider>.py`` only says where and how to connect. One provider is shared by all the
models it serves, so their calls share one connection pool.
"""
