"""Daphne as this project serves it: its HTTP requests leave their bodies unparsed, and a body over the limit is
never stored (``server.py``). ``manage.py runserver`` (this app comes before ``daphne`` in INSTALLED_APPS) and
``python -m assistant.server`` (Daphne's command line) both start it."""
