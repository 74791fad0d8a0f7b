"""Who may knock: each key's requests per minute, and the addresses that tried too many bad keys.

Both count in Django's cache (Redis with ``REDIS_URL``, shared by every web server; else the process's
memory) with fixed windows (``orgs.throttle``): a counter per key and per minute, a counter per address
and per ``API_FAILED_KEY_WINDOW_SECONDS``. An address over the failed-key limit is refused for
``API_FAILED_KEY_LOCKOUT_SECONDS`` before any key is looked up, the right one included: keys cannot be
guessed faster than the limit.
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.core.cache import cache

from assistant.orgs import throttle
from assistant.orgs.models import ApiKey

from .errors import ApiError

RATE_WINDOW_SECONDS = 60


def take_request(key: ApiKey) -> None:
    """Count one request of ``key``; over its requests per minute, 429 with the seconds to wait."""
    limit = key.requests_per_minute
    used, wait = throttle.count(f"api:rate:{key.pk}", RATE_WINDOW_SECONDS)
    if used <= limit:
        return
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
    failures, _left = throttle.count(f"api:failed:{address}", settings.API_FAILED_KEY_WINDOW_SECONDS)
    if failures >= settings.API_FAILED_KEY_LIMIT:
        lockout = settings.API_FAILED_KEY_LOCKOUT_SECONDS
        cache.add(_blocked_name(address), time.time() + lockout, lockout)
