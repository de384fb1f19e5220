"""Pure politeness policies, property-tested."""

from __future__ import annotations

from email.utils import formatdate

from hypothesis import given
from hypothesis import strategies as st

from frontier_crawl.frontier.politeness import delay_for, parse_retry_after, retry_delay

secs = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(fetch=secs, crawl_delay=st.none() | secs, min_delay=secs)
def test_delay_is_the_larger_of_min_delay_and_crawl_delay(
    fetch: float, crawl_delay: float | None, min_delay: float
) -> None:
    d = delay_for(fetch, crawl_delay, min_delay)
    assert d >= min_delay
    if crawl_delay is not None:
        assert d >= crawl_delay
        assert d == max(min_delay, crawl_delay)


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
