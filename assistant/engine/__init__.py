"""The delegation engine: plain async Python, no Django, Channels or Celery.

Public surface (see docs/ARCHITECTURE.md):

- ``types``: provider-neutral messages, tool specs, tool calls, model requests and stream parts.
- ``models.base.Model``: the one interface every provider implements.
- ``usage``: ``Usage`` per call, ``RunUsage`` per run (by model, with cost), ``AgentBudget``.
- ``events``: the typed event stream of a run.
- ``cancel.CancelToken``: one token shared by a run and its agents.
- ``tools``: read-only tools enforcing a ``Scope``.
- ``delegation``: the ``agents`` tool and the sub-agent loop.
- ``loop.run_chat``: the main loop.
"""
