"""The delegation engine: plain async Python, no Django, Channels or Celery.

Public surface (see docs/ARCHITECTURE.md):

- ``types``: provider-neutral messages, tool specs, tool calls, model requests and stream parts.
- ``models.base.Model``: the one interface every provider implements; ``models.openai`` and
  ``models.mistral`` map it to the official SDKs, ``models.streaming`` holds what they share
  (retries, the tool-call buffer), ``providers`` own the clients, keys and base URLs.
- ``errors``: the engine's few typed errors; SDK errors are translated into them at the boundary.
- ``usage``: ``Usage`` per call, ``RunUsage`` per run (by model, with cost, energy and carbon), ``AgentBudget``.
- ``tokens``: token estimation (a text's, a history's, a request's), used by budgets and compaction.
- ``carbon``: energy and carbon of a call with EcoLogits' direct computation.
- ``events``: the typed event stream of a run.
- ``cancel.CancelToken``: one token shared by a run and its agents.
- ``scope.Scope``: the resources one caller may read; ``tools``: read-only tools enforcing it.
- ``delegation``: the ``agents`` tool (its spec, its tasks' checks); ``agent``: the agent loop,
  parallel to the main loop; ``outcomes``: an agent's task, report and outcome; ``compaction`` keeps
  an agent's history within its model's context window.
- ``loop.run_chat``: the main loop.
"""
