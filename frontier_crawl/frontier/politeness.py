"""Politeness policy as pure functions; the frontier stores only the wake times they produce.

Kept apart from the mechanism (``frontier.py``) as Heritrix keeps ``politenessDelayFor`` apart from
``WorkQueueFrontier``, so every policy can be property-tested without a crawl.
"""

from __future__ import annotations


def delay_for(fetch_s: float, crawl_delay_s: float | None, min_delay_s: float) -> float:
    """Seconds to wait after a response from a host before the next request to it.

    The larger of the configured minimum and the host's robots.txt Crawl-delay. ``fetch_s`` (the
    last transfer's duration) is the input of the adaptive policy, which is not enabled yet.
    """
    del fetch_s  # reserved for the adaptive delay (delay_factor x fetch time)
    if crawl_delay_s is None or crawl_delay_s != crawl_delay_s or crawl_delay_s < 0:  # NaN-safe
        return min_delay_s
    return max(min_delay_s, crawl_delay_s)


def retry_delay(
    attempt: int, base_s: float, max_s: float, retry_after_s: float | None = None
) -> float:
    """Wait before retry number ``attempt + 1``: exponential backoff, Retry-After honoured.

    ``base_s * 2**attempt``, raised to ``retry_after_s`` when the server asked for longer, and
    never above ``max_s``.
    """
    backoff = base_s * (2.0 ** min(attempt, 62))
    if retry_after_s is not None and retry_after_s > backoff:
        backoff = retry_after_s
    return max(0.0, min(backoff, max_s))


def parse_retry_after(value: str | None, now_wall: float) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date), None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_wall)
