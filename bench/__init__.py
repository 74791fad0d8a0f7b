"""Benchmarks of the delegation engine: ``python -m bench`` (``make bench``) runs them all.

Each benchmark is one module of ``bench.benchmarks`` with a function decorated by
``@benchmark(...)`` that returns result rows; ``bench.report`` writes docs/BENCHMARKS.md from them.
Like the engine, the benchmarks import no Django.
"""
