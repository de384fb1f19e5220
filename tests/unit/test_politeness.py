"""Pure politeness policies, property-tested."""

from __future__ import annotations

import math
from email.utils import formatdate

from hypothesis import given
from hypothesis import strategies as st

from frontier_crawl.frontier.politeness import (
    LONGEST_WAIT_S,
    DelayPolicy,
    delay_for,
    host_backoff,
    parse_retry_after,
    retry_delay,
)

secs = st.floats(min_value=0, max_value=1e6, allow_nan=False)
any_secs = st.none() | st.floats(allow_nan=True, allow_infinity=True)
policies = st.builds(
    DelayPolicy,
    min_delay_s=secs,
    max_delay_s=secs,
    delay_factor=st.floats(0, 100),
    max_crawl_delay_s=secs,
    backoff_s=secs,
    max_backoff_s=secs,
)


@given(fetch=secs, crawl_delay=any_secs, p=policies)
def test_delay_bounds(fetch: float, crawl_delay: float | None, p: DelayPolicy) -> None:
    d = delay_for(fetch, crawl_delay, p)
    assert math.isfinite(d)
    assert d >= p.min_delay_s  # never below the configured minimum
    assert d <= max(p.min_delay_s, p.max_delay_s, LONGEST_WAIT_S)
    if crawl_delay is not None and math.isfinite(crawl_delay) and crawl_delay >= 0:
        honoured = (
            crawl_delay if p.max_crawl_delay_s == 0 else min(crawl_delay, p.max_crawl_delay_s)
        )
        assert d >= min(honoured, LONGEST_WAIT_S)  # Crawl-delay is never violated (unless capped)


@given(fetch=secs, p=policies)
def test_adaptive_delay_is_factor_times_fetch_clamped(fetch: float, p: DelayPolicy) -> None:
    upper = max(p.min_delay_s, p.max_delay_s)
    adaptive = p.delay_factor * min(fetch, LONGEST_WAIT_S)
    assert delay_for(fetch, None, p) == min(max(adaptive, p.min_delay_s), upper)


@given(fetch1=secs, fetch2=secs, p=policies)
def test_adaptive_delay_is_monotonic_in_fetch_time(
    fetch1: float, fetch2: float, p: DelayPolicy
) -> None:
    lo, hi = sorted((fetch1, fetch2))
    assert delay_for(lo, None, p) <= delay_for(hi, None, p)


def test_long_crawl_delay_is_honoured_unless_capped() -> None:
    p = DelayPolicy(min_delay_s=1.0, max_delay_s=30.0)
    assert delay_for(0.1, 600.0, p) == 600.0  # above max_delay_s: Crawl-delay still wins
    assert delay_for(0.1, 600.0, DelayPolicy(min_delay_s=1.0, max_crawl_delay_s=60.0)) == 60.0
    assert delay_for(0.1, math.inf, p) == LONGEST_WAIT_S


@given(errors=st.integers(0, 1000), p=policies)
def test_host_backoff_is_bounded_and_monotonic(errors: int, p: DelayPolicy) -> None:
    b = host_backoff(errors, p)
    assert 0 <= b <= max(p.max_backoff_s, 0)
    assert host_backoff(errors + 1, p) >= b
    if errors == 0:
        assert b == 0


def test_host_backoff_doubles() -> None:
    p = DelayPolicy(backoff_s=1.0, max_backoff_s=10.0)
    assert [host_backoff(e, p) for e in range(6)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0]


@given(attempt=st.integers(0, 100), base=secs, cap=secs, after=st.none() | secs)
def test_retry_delay_is_bounded_and_honours_retry_after(
    attempt: int, base: float, cap: float, after: float | None
) -> None:
    d = retry_delay(attempt, base, cap, after)
    assert 0 <= d <= cap
    if after is not None:
        assert d >= min(after, cap)


def test_retry_delay_doubles() -> None:
    assert [retry_delay(a, 1.0, 100.0) for a in range(4)] == [1.0, 2.0, 4.0, 8.0]


def test_parse_retry_after() -> None:
    assert parse_retry_after("120", 0.0) == 120.0
    assert parse_retry_after(None, 0.0) is None
    assert parse_retry_after("soon", 0.0) is None
    now = 1_700_000_000.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now) == 30.0
