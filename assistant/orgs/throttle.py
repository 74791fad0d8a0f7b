"""Fixed-window counters in Django's cache (Redis with ``REDIS_URL``, else the process's memory).

``cache.add`` then ``cache.incr`` are atomic in both, so concurrent requests never both take the last place.
"""

from __future__ import annotations

import math
import time

from django.core.cache import cache


def count(name: str, window_seconds: int) -> tuple[int, int]:
    """Add one to the counter ``name`` of the current window; its new value and the seconds left in the window."""
    now = time.time()
    window = int(now // window_seconds)
    key = f"{name}:{window}"
    cache.add(key, 0, window_seconds * 2)
    try:
        value = cache.incr(key)
    except ValueError:  # evicted or expired between add and incr: this request starts it again
        cache.add(key, 1, window_seconds * 2)
        value = 1
    return value, max(1, math.ceil((window + 1) * window_seconds - now))
