"""Frontier.complete(outcome): retries and holds decided by the frontier from a result's facts."""

from __future__ import annotations

from email.utils import formatdate
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier_crawl.config import CrawlSettings, parse
from frontier_crawl.fetch.types import ErrorKind
from frontier_crawl.frontier import Completion, Failure, Frontier
from frontier_crawl.frontier.completion import (
    CONNECTION_ERRORS,
    TRANSIENT_ERRORS,
    RetryPolicy,
    failure_of,
    retry_in,
)
from tests.unit.test_frontier import A, make

POLICY = RetryPolicy(retries=3, backoff_s=2.0, max_delay_s=300.0)


def test_the_frontiers_error_kinds_agree_with_fetch() -> None:
    """The frontier names error kinds by value (it never imports fetch): the same sets."""
    assert {k.value for k in ErrorKind if k.transient} == TRANSIENT_ERRORS
    assert {k.value for k in ErrorKind} >= CONNECTION_ERRORS
    assert {ErrorKind.DNS.value, ErrorKind.CONNECT.value, ErrorKind.TLS.value} == CONNECTION_ERRORS


@pytest.mark.parametrize(
    ("status", "error", "failure"),
    [
        (200, None, Failure.NONE),
        (404, None, Failure.NONE),
        (429, None, Failure.SERVER),
        (503, None, Failure.SERVER),
        (500, None, Failure.URL),
        (0, "dns-error", Failure.CONNECTION),
        (0, "tls-error", Failure.CONNECTION),
        (0, "timeout", Failure.URL),
        (200, "too-large", Failure.NONE),
        (0, "address-refused", Failure.NONE),
    ],
)
def test_failure_of(status: int, error: str | None, failure: Failure) -> None:
    assert failure_of(Completion(0.0, status, error)) is failure


@given(
    st.integers(0, 599),
    st.sampled_from([None, *(k.value for k in ErrorKind)]),
    st.integers(0, 6),
    st.none() | st.floats(0.0, 1e6),
)
def test_retry_in_is_bounded_and_only_for_transient_failures_with_attempts_left(
    status: int, error: str | None, attempt: int, after: float | None
) -> None:
    delay = retry_in(Completion(0.0, status, error), attempt, after, POLICY)
    transient = error in TRANSIENT_ERRORS if error else status == 429 or status >= 500
    if not transient or attempt >= POLICY.retries or (after is not None and after > 300.0):
        assert delay is None
    else:
        assert delay is not None and 0.0 <= delay <= POLICY.max_delay_s
        assert delay >= min(2.0 * 2**attempt, 300.0)


def test_a_transient_failure_is_retried_with_backoff_until_attempts_run_out(
    tmp_path: Path,
) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0, retry_policy=POLICY)
    f.add([f"{A}/t"], depth=0)
    now, delays = 0.0, []
    for attempt in range(4):
        (t,) = f.next_ready(now, 5)
        assert t.attempt == attempt
        outcome = Completion(now, 0, "timeout")
        assert f.will_retry(t, outcome) == (attempt < 3)
        settled = f.complete(t, outcome)
        assert settled.retried == (attempt < 3) and settled.failed
        wake = f.next_wake()
        if wake is None:
            break
        delays.append(wake - now)
        now = wake
    assert delays == [2.0, 4.0, 8.0] and f.pending == 0
    f.close()


def test_a_503s_retry_after_is_the_retry_delay_and_holds_the_host(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=1.0, retry_policy=POLICY)
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    settled = f.complete(t, Completion(0.0, 503, None, "60"))
    assert settled.retried and settled.held_s == 59.0  # beyond the 1 s delay
    assert f.next_wake() == 60.0
    f.close()


def test_an_http_date_retry_after_is_read_with_the_frontiers_wall_clock(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0, retry_policy=POLICY, wall_clock=lambda: 1_000_000.0)
    f.add([f"{A}/1"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    date = formatdate(1_000_000.0 + 120, usegmt=True)
    assert f.complete(t, Completion(0.0, 429, None, date)).held_s == 120.0
    f.close()


def test_a_retry_after_past_the_cap_is_not_retried_and_holds_the_host_for_the_cap(
    tmp_path: Path,
) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0, retry_policy=POLICY)
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    outcome = Completion(0.0, 429, None, "86400")
    assert not f.will_retry(t, outcome)
    settled = f.complete(t, outcome)
    assert not settled.retried and settled.held_s == 300.0
    assert f.next_wake() == 300.0 and f.pending == 1  # /1 given up, /2 waits for the host
    f.close()


def test_a_final_response_is_done_and_spaced_by_its_fetch_time(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=1.0, delay_factor=2.0, retry_policy=POLICY)
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    assert not f.will_retry(t, Completion(3.0, 200, duration_s=3.0))
    settled = f.complete(t, Completion(3.0, 200, duration_s=3.0))
    assert not settled.retried and not settled.failed and settled.held_s == 0.0
    assert f.next_wake() == 3.0 + 6.0  # delay_factor x the fetch time, from its end
    f.close()


def test_a_failed_transfers_time_is_not_the_hosts_answer_time(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=1.0, delay_factor=2.0, retry_policy=RetryPolicy(0))
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    settled = f.complete(t, Completion(30.0, 0, "timeout", duration_s=30.0))
    assert not settled.retried and settled.failed
    assert f.next_wake() == 31.0  # min_delay_s, not 2 x 30 s
    f.close()


def test_robots_429_retry_after_is_capped(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True, min_delay_s=0.0, robots_retry_s=1.0,
                retry_policy=RetryPolicy(max_delay_s=50.0))  # fmt: skip
    f.add([f"{A}/1"], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 429, b"", retry_after="3600")
    assert f.next_wake() == 50.0
    f.close()


def test_a_reloaded_configs_retry_settings_apply_to_the_next_result(tmp_path: Path) -> None:
    def settings(retries: int) -> CrawlSettings:
        return parse({
            "crawl": {"seeds": [f"{A}/"], "output_dir": str(tmp_path / "out")},
            "scope": {"allow_domains": ["a.test"]},
            "politeness": {"min_delay_s": 0.0, "obey_robots": False},
            "fetch": {"retries": retries, "retry_backoff_s": 1.0},
        })  # fmt: skip

    f = Frontier.from_settings(settings(0), tmp_path / "state")
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    (t,) = f.next_ready(0.0, 1)
    assert not f.will_retry(t, Completion(0.0, 500))  # fetch.retries = 0
    f.reconfigure(settings(2), 0.0)
    assert f.will_retry(t, Completion(0.0, 500))
    assert f.complete(t, Completion(0.0, 500)).retried
    f.close()
