"""Politeness policy as pure functions; the frontier stores only the wake times they produce.

Kept apart from the mechanism (``frontier.py``) as Heritrix keeps ``politenessDelayFor`` apart from
``WorkQueueFrontier``, so every policy is property-tested without a crawl:

* :func:`delay_for` — after a response: ``clamp(delay_factor x fetch_s, min, max)``, raised to the
  robots.txt Crawl-delay (optionally capped by ``max_crawl_delay_s``; off by default).
* :func:`host_backoff` — after consecutive 429/5xx/connection errors from one host: exponential.
* :func:`retry_delay` — before retrying one URL: exponential, Retry-After honoured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from frontier_crawl.config import PolitenessSection


@dataclass(slots=True, frozen=True)
class DelayPolicy:
    """The numbers the politeness functions need (from ``[politeness]``)."""

    min_delay_s: float = 1.0
    max_delay_s: float = 30.0
    delay_factor: float = 0.0
    max_crawl_delay_s: float = 0.0  #: 0: no cap
    backoff_s: float = 5.0
    max_backoff_s: float = 600.0

    @classmethod
    def from_settings(cls, p: PolitenessSection) -> DelayPolicy:
        return cls(
            min_delay_s=p.min_delay_s,
            max_delay_s=p.max_delay_s,
            delay_factor=p.delay_factor,
            max_crawl_delay_s=p.max_crawl_delay_s,
            backoff_s=p.backoff_s,
            max_backoff_s=p.max_backoff_s,
        )


#: no single wait is longer than this, whatever a server or robots.txt says (a week)
LONGEST_WAIT_S = 7 * 86_400.0


def _seconds(x: float | None) -> float:
    """A usable wait: None, NaN and negatives are 0; +inf and huge values are LONGEST_WAIT_S."""
    if x is None or math.isnan(x) or x < 0:
        return 0.0
    return min(x, LONGEST_WAIT_S)


def delay_for(fetch_s: float, crawl_delay_s: float | None, p: DelayPolicy) -> float:
    """Seconds from the end of a response to the next request to the same host.

    ``clamp(delay_factor * fetch_s, min_delay_s, max(min_delay_s, max_delay_s))``, then raised to
    the Crawl-delay (capped at ``max_crawl_delay_s`` when that is set). Never below min_delay_s.
    """
    upper = max(p.min_delay_s, p.max_delay_s)
    adaptive = min(max(p.delay_factor * _seconds(fetch_s), p.min_delay_s), upper)
    crawl_delay = _seconds(crawl_delay_s)
    if p.max_crawl_delay_s > 0:
        crawl_delay = min(crawl_delay, p.max_crawl_delay_s)
    return max(adaptive, crawl_delay)


def host_backoff(errors: int, p: DelayPolicy) -> float:
    """Extra wait after ``errors`` consecutive 429/5xx/connection errors from one host."""
    if errors <= 0:
        return 0.0
    return min(p.backoff_s * 2.0 ** min(errors - 1, 62), p.max_backoff_s)


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
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_wall)
