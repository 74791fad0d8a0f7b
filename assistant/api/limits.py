"""Who may knock: each key's requests per minute, and the addresses that tried too many bad keys.

Both count in Django's cache (Redis with ``REDIS_URL``, shared by every web server; else the process's
memory) with fixed windows: a counter per key and per minute, a counter per address and per
``API_FAILED_KEY_WINDOW_SECONDS``. ``cache.add`` then ``cache.incr`` are atomic, so concurrent
requests never both take the last place. An address over the failed-key limit is refused for
``API_FAILED_KEY_LOCKOUT_SECONDS`` before any key is looked up, the right one included: keys cannot be
guessed faster than the limit.
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.core.cache import cache

from assistant.orgs.models import ApiKey

from .errors import ApiError

RATE_WINDOW_SECONDS = 60


def _count(name: str, timeout: int) -> int:
    """Add one to the counter ``name`` (created with ``timeout``) and return it, atomically."""
    cache.add(name, 0, timeout)
    try:
        return cache.incr(name)
    except ValueError:  # evicted or expired between add and incr: this request starts it again
        cache.add(name, 1, timeout)
        return 1


def take_request(key: ApiKey) -> None:
    """Count one request of ``key``; over its requests per minute, 429 with the seconds to wait."""
    now = time.time()
    window = int(now // RATE_WINDOW_SECONDS)
    limit = key.requests_per_minute
    if _count(f"api:rate:{key.pk}:{window}", RATE_WINDOW_SECONDS * 2) <= limit:
        return
    wait = max(1, math.ceil((window + 1) * RATE_WINDOW_SECONDS - now))
    raise ApiError(
        429,
        "rate_limit_exceeded",
        f"Rate limit reached: this key may make {limit} requests per minute. Try again in {wait} s.",
        type="requests",
        retry=True,
        retry_after=str(wait),
    )


def _blocked_name(address: str) -> str:
    return f"api:blocked:{address}"


def refuse_blocked(address: str) -> None:
    """429 for an address that sent too many bad keys lately, whatever key it sends now."""
    until = cache.get(_blocked_name(address))
    if until is None:
        return
    wait = max(1, math.ceil(float(until) - time.time()))
    raise ApiError(
        429,
        "too_many_failed_keys",
        f"Too many invalid API keys from this address: try again in {wait} s.",
        type="requests",
        retry_after=str(wait),
    )


def failed_key(address: str) -> None:
    """Count a bad key from ``address``; past the limit, the address is refused for the lock-out time."""
    span = settings.API_FAILED_KEY_WINDOW_SECONDS
    window = int(time.time() // span)
    if _count(f"api:failed:{address}:{window}", span * 2) >= settings.API_FAILED_KEY_LIMIT:
        lockout = settings.API_FAILED_KEY_LOCKOUT_SECONDS
        cache.add(_blocked_name(address), time.time() + lockout, lockout)
