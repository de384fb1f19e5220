"""Frontier scheduling on real LMDB with a test clock: politeness, robots, spill/refill, resume."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.frontier import Failure, Frontier, HostState, StateMismatch, Ticket
from frontier_crawl.frontier.identity import LAYOUT_VERSION, url_digest
from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.store import open_env
from frontier_crawl.frontier.traps import Limits

A = "http://a.test"
B = "http://b.test"


HOOKS = ("wall_clock", "route", "worker", "on_foreign")  #: make's keywords that are hooks


def make(tmp_path: Path, **overrides: Any) -> tuple[Frontier, list[tuple[str, str]]]:
    rejected: list[tuple[str, str]] = []
    policy = DelayPolicy(
        min_delay_s=overrides.pop("min_delay_s", 1.0),
        max_delay_s=overrides.pop("max_delay_s", 30.0),
        delay_factor=overrides.pop("delay_factor", 0.0),
        max_crawl_delay_s=overrides.pop("max_crawl_delay_s", 0.0),
        backoff_s=overrides.pop("backoff_s", 0.0),
        max_backoff_s=overrides.pop("max_backoff_s", 600.0),
    )
    limits = Limits(max_depth=overrides.pop("max_depth", 3), **overrides.pop("limits", {}))
    options: dict[str, Any] = {
        "allow_domains": ["a.test", "b.test"],
        "exclude": [r"\.jpg$"],
        "limits": limits,
        "max_pages": 0,
        "policy": policy,
        "max_host_errors": 3,
        "connections_per_host": 1,
        "obey_robots": False,
        "user_agent": "testbot",
        "robots_ttl_s": 3600.0,
        "robots_retry_s": 10.0,
        "robots_attempts": 2,
        "memory_urls": 1000,
        "map_size": 1 << 26,
    }
    options.update(overrides)
    hooks = FrontierHooks(
        on_reject=lambda t, r: rejected.append((t.url, r)),
        **{k: options.pop(k) for k in HOOKS if k in options},
    )
    f = Frontier(tmp_path / "state", FrontierOptions(**options), hooks)
    return f, rejected


@pytest.fixture
def frontier(tmp_path: Path) -> Iterator[Frontier]:
    f, _ = make(tmp_path)
    yield f
    f.close()


def urls(tickets: list[Ticket]) -> list[str]:
    return [t.url for t in tickets]


def test_admission_scope_dedup_depth(frontier: Frontier) -> None:
    added = frontier.add(
        [
            f"{A}/1",
            f"{A}/1#frag",
            "HTTP://A.TEST:80/1",
            f"{A}/x.jpg",
            "http://c.test/",
            "mailto:x@y",
            f"{B}/1",
            "http://sub.a.test/",
        ],
        depth=0,
    )
    assert added == 3  # a/1 (three spellings), b/1, sub.a.test/ ; jpg excluded, c.test out of scope
    assert frontier.add([f"{A}/2"], depth=4) == 0  # beyond max_depth (recorded, see traps test)
    assert frontier.pending == 3


def test_settled_links_are_skipped_once_committed(frontier: Frontier) -> None:
    nav = [f"{A}/1", "HTTP://A.TEST:80/1", "http://c.test/x", "mailto:x@y", f"{A}/x.jpg"]
    with frontier.batch():
        assert frontier.add(nav, depth=0) == 1
        # not committed yet: a repeat takes the full path (the seen-set answers)
        assert frontier.add(nav, depth=1) == 0
    asked = frontier.view.seen_stats()["recent_hits"]
    with frontier.batch():
        assert frontier.add(nav, depth=1) == 0
    assert frontier.view.seen_stats()["recent_hits"] == asked  # answered before the seen-set
    assert frontier.pending == 1


def test_links_of_an_aborted_transaction_are_not_settled(frontier: Frontier) -> None:
    with pytest.raises(RuntimeError), frontier.batch():
        assert frontier.add([f"{A}/1"], depth=0) == 1
        raise RuntimeError("abort: LMDB forgets the seen entry")
    assert frontier.add([f"{A}/1"], depth=0) == 1  # still new: admitted
    assert frontier.add([f"{A}/1"], depth=0) == 0  # committed (own transaction): settled


def test_settled_links_do_not_change_the_max_pages_stop(tmp_path: Path) -> None:
    f, _ = make(tmp_path, max_pages=2)
    assert f.add([f"{A}/1", f"{A}/2"], depth=0) == 2
    assert f.add([f"{A}/1", f"{B}/3", "http://c.test/"], depth=1) == 0
    assert f.pending == 2
    f.close()


def test_settled_links_are_skipped_from_a_list_and_from_an_iterator(tmp_path: Path) -> None:
    f, _ = make(tmp_path, max_pages=100)  # far from the stop: a list is screened before the loop
    nav = [f"{A}/1", f"{A}/2", "mailto:x@y", f"{A}/x.jpg"]
    assert f.add(nav, depth=0) == 2  # its own transaction, committed: all four settled
    asked = f.view.seen_stats()["recent_hits"]
    assert f.add(nav, depth=1) == 0
    assert f.add(iter(nav), depth=1) == 0  # no len(): screened in the loop
    assert f.view.seen_stats()["recent_hits"] == asked  # answered before the seen-set
    assert f.add([*nav, f"{A}/3", f"{A}/1"], depth=1) == 1
    assert f.pending == 3
    f.close()


def test_foreign_links_are_sent_once_per_committed_transaction(tmp_path: Path) -> None:
    sent: list[tuple[int, str]] = []
    f, _ = make(
        tmp_path,
        route=lambda origin: 1 if origin == B else 0,
        on_foreign=lambda dest, link: sent.append((dest, link[0])),
    )
    with f.batch():
        assert f.add([f"{A}/1", f"{B}/1", "http://B.test/1"], depth=0) == 1
    with f.batch():
        f.add([f"{B}/1", "http://B.test/1", f"{B}/2"], depth=1)
    assert sent == [(1, f"{B}/1"), (1, f"{B}/1"), (1, f"{B}/2")]
    f.close()


def test_in_scope_subdomains_and_exclusions(frontier: Frontier) -> None:
    assert frontier.in_scope("http://a.test/")
    assert frontier.in_scope("http://x.y.a.test:8080/p")
    assert not frontier.in_scope("http://aa.test/")
    assert not frontier.in_scope("http://a.test.evil/")
    assert not frontier.in_scope("http://c.test/")
    assert not frontier.in_scope("http://a.test/x.jpg")


def test_one_request_per_host_and_delay_from_end_of_response(frontier: Frontier) -> None:
    frontier.add([f"{A}/1", f"{A}/2", f"{B}/1"], depth=0, now=0.0)
    first = frontier.next_ready(0.0, 10)
    assert sorted(urls(first)) == [f"{A}/1", f"{B}/1"]  # one per host, even with 10 slots
    assert frontier.next_ready(0.5, 10) == []
    a1 = next(t for t in first if t.origin == A)
    frontier.finish(a1, now=2.0, fetch_s=2.0)
    assert frontier.view.host_state(A) is HostState.SNOOZED
    assert frontier.next_wake() == 3.0  # end of response + min_delay_s
    assert frontier.next_ready(2.9, 10) == []
    assert urls(frontier.next_ready(3.0, 10)) == [f"{A}/2"]


def test_waiting_host_does_not_hold_a_slot(frontier: Frontier) -> None:
    frontier.add([f"{A}/{i}" for i in range(5)] + [f"{B}/1"], depth=0, now=0.0)
    got = frontier.next_ready(0.0, 1)
    frontier.finish(got[0], now=0.0)
    # the host just served is snoozed; the other is handed out with the only free slot
    nxt = frontier.next_ready(0.1, 1)
    assert len(nxt) == 1 and nxt[0].origin != got[0].origin


def test_connections_per_host(tmp_path: Path) -> None:
    f, _ = make(tmp_path, connections_per_host=3, min_delay_s=0.0)
    f.add([f"{A}/{i}" for i in range(10)], depth=0)
    assert len(f.next_ready(0.0, 10)) == 3
    f.close()


def test_retry_waits_behind_the_hosts_other_urls(frontier: Frontier) -> None:
    frontier.add([f"{A}/1", f"{A}/2", f"{A}/3"], depth=0)
    (t,) = frontier.next_ready(0.0, 5)
    held = frontier.retry(t, now=1.0, delay_s=30.0, failure=Failure.URL)
    assert held == 0.0 and frontier.pending == 3
    # the healthy URLs go on at the host's usual pace (min_delay_s 1 s from the end)
    (b,) = frontier.next_ready(2.0, 5)
    assert b.url == f"{A}/2"
    frontier.finish(b, 2.0)
    (c,) = frontier.next_ready(3.0, 5)
    assert c.url == f"{A}/3"
    frontier.finish(c, 3.0)
    assert frontier.next_ready(4.0, 5) == []  # only the retry is left: it waits its own time
    assert frontier.next_wake() == 31.0
    (again,) = frontier.next_ready(31.0, 5)
    assert again.url == t.url and again.attempt == 1


def test_a_due_retry_goes_before_the_rest_of_the_queue(frontier: Frontier) -> None:
    frontier.add([f"{A}/{i}" for i in range(5)], depth=0)
    (t,) = frontier.next_ready(0.0, 5)
    frontier.retry(t, now=0.0, delay_s=2.0, failure=Failure.URL)
    (n,) = frontier.next_ready(1.0, 5)
    assert n.url == f"{A}/1"
    frontier.finish(n, 1.0)
    (r,) = frontier.next_ready(2.0, 5)
    assert r.url == t.url and r.attempt == 1


def test_one_failing_url_never_backs_its_host_off(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=1.0, backoff_s=5.0)
    f.add([f"{A}/bad"] + [f"{A}/{i}" for i in range(3)], depth=0)
    (bad,) = f.next_ready(0.0, 5)
    now = 0.0
    for i in range(3):  # the same URL timing out again and again
        assert f.retry(bad, now, delay_s=0.0, failure=Failure.URL) == 0.0
        assert f.next_wake() == now + 1.0  # only the politeness delay: no backoff
        now += 1.0
        (good,) = f.next_ready(now, 5)  # another URL goes before the retry
        assert good.url == f"{A}/{i}"
        f.finish(good, now)
        now += 1.0
        (bad,) = f.next_ready(now, 5)
        assert bad.url == f"{A}/bad" and bad.attempt == i + 1
    f.close()


def test_failures_of_distinct_urls_in_a_row_back_the_host_off(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=1.0, backoff_s=5.0, host_error_urls=3)
    f.add([f"{A}/{i}" for i in range(6)], depth=0)
    now = 0.0
    for i in range(3):
        (t,) = f.next_ready(now, 5)
        held = f.finish(t, now, failure=Failure.URL)
        assert held == (5.0 - 1.0 if i == 2 else 0.0)  # the third distinct URL: host-wide
        now = f.next_wake() or now
    assert now == 2.0 + 5.0
    (t,) = f.next_ready(now, 5)
    f.finish(t, now)  # a good response resets it
    (t,) = f.next_ready(now + 1.0, 5)
    assert f.finish(t, now + 1.0, failure=Failure.URL) == 0.0
    f.close()


def test_a_hold_keeps_the_host_and_is_returned(frontier: Frontier) -> None:
    frontier.add([f"{A}/1", f"{A}/2"], depth=0)
    (t,) = frontier.next_ready(0.0, 5)
    held = frontier.finish(t, 1.0, failure=Failure.SERVER, hold_s=60.0)
    assert held == 60.0 - 1.0  # beyond the 1 s politeness delay
    assert frontier.next_wake() == 61.0


@pytest.mark.parametrize("cph", [1, 4, 16])
def test_the_delay_spaces_request_starts_whatever_the_connections(
    tmp_path: Path, cph: int
) -> None:
    f, _ = make(tmp_path, connections_per_host=cph, min_delay_s=0.2)
    f.add([f"{A}/{i}" for i in range(40)], depth=0)
    starts: list[float] = []
    open_: list[tuple[float, Ticket]] = []
    now = 0.0
    while f.pending:
        for t in f.next_ready(now, 100):
            starts.append(now)
            open_.append((now + 0.5, t))  # every response takes 0.5 s
        assert len(open_) <= cph
        open_.sort(key=lambda x: x[0])
        wake = f.next_wake()
        end = open_[0][0] if open_ else float("inf")
        if open_ and end <= (wake if wake is not None else end):
            now = end
            f.finish(open_.pop(0)[1], now, fetch_s=0.5)
        else:
            assert wake is not None
            now = wake
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.2 - 1e-9
    # one connection: the delay also runs from the end of each response
    expected = 0.7 if cph == 1 else 0.2
    assert max(gaps) == pytest.approx(expected) and min(gaps) == pytest.approx(expected)
    f.close()


def test_crawl_delay_spaces_starts_with_several_connections(tmp_path: Path) -> None:
    f, _ = make(tmp_path, connections_per_host=4, min_delay_s=0.0, obey_robots=True)
    f.add([f"{A}/{i}" for i in range(5)], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 200, b"User-agent: *\nCrawl-delay: 0.05\n")
    starts = []
    now = 0.0
    while f.pending:
        got = f.next_ready(now, 10)
        assert len(got) <= 1  # never two starts at one instant
        starts += [now] * len(got)
        for t in got:
            f.finish(t, now + 0.01, fetch_s=0.01)  # answered fast: the slot is free again
        wake = f.next_wake()
        if wake is None:
            break
        now = wake
    assert len(starts) == 5
    assert all(b - a >= 0.05 - 1e-9 for a, b in itertools.pairwise(starts))
    f.close()


def test_spill_and_refill_through_lmdb(tmp_path: Path) -> None:
    f, _ = make(tmp_path, memory_urls=10, min_delay_s=0.0)
    hosts = [A, B]
    f.add([f"{h}/{i}" for i in range(100) for h in hosts], depth=0)
    assert f.view.hot_total <= 10 and f.view.spilled == 190
    seen: list[str] = []
    now = 0.0
    while f.pending:
        batch = f.next_ready(now, 4)
        for t in batch:
            seen.append(t.url)
            f.finish(t, now)
        assert f.view.hot_total <= 10 + 2  # the budget, plus at most one forced refill per host
        now += 0.001
    assert sorted(seen) == sorted(f"{h}/{i}" for i in range(100) for h in hosts)
    assert [u for u in seen if u.startswith(A)] == [f"{A}/{i}" for i in range(100)]  # FIFO
    assert f.view.refilled == 190
    f.close()


def test_robots_first_then_disallow_and_crawl_delay(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, obey_robots=True, min_delay_s=0.5)
    f.add([f"{A}/private/x", f"{A}/ok"], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    assert robots.robots and robots.url == f"{A}/robots.txt"
    assert f.next_ready(0.0, 5) == []  # nothing else until robots.txt is known
    f.robots_done(robots, 1.0, 200, b"User-agent: *\nDisallow: /private/\nCrawl-delay: 4\n")
    assert f.next_ready(2.0, 5) == []  # Crawl-delay 4 > min_delay 0.5
    (t,) = f.next_ready(5.0, 5)
    assert t.url == f"{A}/ok"
    assert rejected == [(f"{A}/private/x", "robots-denied")]
    f.finish(t, 5.0)
    assert f.pending == 0
    f.close()
    # the robots.txt is cached on disk: a new frontier on the same state does not refetch it
    g, _ = make(tmp_path, obey_robots=True)
    g.add([f"{A}/again"], depth=0)
    assert not g.next_ready(100.0, 5)[0].robots
    g.close()


def test_robots_4xx_allows_all_and_5xx_retries_then_retires(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, obey_robots=True, min_delay_s=0.0)
    f.add([f"{A}/1", f"{B}/1", f"{B}/2"], depth=0)
    tickets = {t.origin: t for t in f.next_ready(0.0, 5)}
    f.robots_done(tickets[A], 0.0, 404, b"")
    f.robots_done(tickets[B], 0.0, 503, b"")
    assert urls(f.next_ready(0.0, 5)) == [f"{A}/1"]
    assert f.next_wake() == 10.0  # robots_retry_s
    (again,) = f.next_ready(10.0, 5)
    assert again.robots and again.origin == B
    f.robots_done(again, 10.0, 0, b"")  # unreachable: second and last attempt
    assert f.view.host_state(B) is HostState.RETIRED
    assert sorted(rejected) == [(f"{B}/1", "robots-unavailable"), (f"{B}/2", "robots-unavailable")]
    assert f.pending == 1  # only a/1 in flight
    f.close()


def test_resume_from_lmdb(tmp_path: Path) -> None:
    f, _ = make(tmp_path, memory_urls=5)
    f.add([f"{A}/{i}" for i in range(20)], depth=1)
    (t,) = f.next_ready(0.0, 5)  # in flight when the process "dies"
    f.close()
    g, _ = make(tmp_path, memory_urls=5, min_delay_s=0.0)
    assert g.pending == 20  # the in-flight URL is still outstanding
    assert g.add([f"{A}/3", t.url], depth=1) == 0  # seen-set restored
    got: list[str] = []
    now = 0.0
    while g.pending:
        for x in g.next_ready(now, 5):
            got.append(x.url)
            g.finish(x, now)
        now += 1
    assert sorted(got) == sorted(f"{A}/{i}" for i in range(20))
    g.close()


def test_max_pages(tmp_path: Path) -> None:
    f, _ = make(tmp_path, max_pages=3)
    assert f.add([f"{A}/{i}" for i in range(10)], depth=0) == 3
    assert f.add([f"{B}/1"], depth=0) == 0
    f.close()


def test_retiring_a_host_rejects_its_spilled_urls_too(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, obey_robots=True, memory_urls=3, robots_attempts=1)
    f.add([f"{A}/{i}" for i in range(10)], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 500, b"")
    assert sorted(u for u, _ in rejected) == sorted(f"{A}/{i}" for i in range(10))
    assert {r for _, r in rejected} == {"robots-unavailable"}
    assert f.pending == 0
    assert f.add([f"{A}/new"], depth=0) == 0  # a retired host takes no more URLs
    assert rejected[-1] == (f"{A}/new", "robots-unavailable")
    f.close()


def test_batch_groups_changes_into_one_transaction(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0, memory_urls=2)
    with f.batch():
        f.add([f"{A}/{i}" for i in range(5)], depth=0)
        (t,) = f.next_ready(0.0, 5)  # refill inside the batch sees the batch's own writes
        f.finish(t, 0.0)
    f.close()
    g, _ = make(tmp_path, min_delay_s=0.0)
    assert g.pending == 4
    g.close()


def test_adaptive_delay_from_fetch_time(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.1, max_delay_s=5.0, delay_factor=3.0)
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    f.finish(t, now=2.0, fetch_s=1.0)
    assert f.next_wake() == 2.0 + 3.0  # 3 x the 1 s fetch
    f.close()


def test_long_crawl_delay_snoozes_without_dropping(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, obey_robots=True, min_delay_s=0.0)
    f.add([f"{A}/{i}" for i in range(3)], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 200, b"User-agent: *\nCrawl-delay: 600\n")
    now, got = 0.0, []
    while f.pending:
        wake = f.next_wake()
        assert wake is not None  # always a wake time: never dropped, never stuck
        now = wake
        for t in f.next_ready(now, 5):
            got.append((now, t.url))
            f.finish(t, now)
    assert [u for _, u in got] == [f"{A}/{i}" for i in range(3)]
    assert [n for n, _ in got] == [600.0, 1200.0, 1800.0]
    assert rejected == []
    f.close()


def test_host_backoff_and_retirement_after_connection_errors(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, min_delay_s=0.0, backoff_s=1.0)  # max_host_errors=3
    f.add([f"{A}/{i}" for i in range(6)], depth=0)
    now, waits = 0.0, []
    for _ in range(3):
        (t,) = f.next_ready(now, 5)
        f.finish(t, now, failure=Failure.CONNECTION)
        wake = f.next_wake()
        if wake is not None:
            waits.append(wake - now)
            now = wake
    assert waits == [1.0, 2.0]  # exponential backoff per host; the third failure retires it
    assert f.view.host_state(A) is HostState.RETIRED
    assert sorted(u for u, _ in rejected) == [f"{A}/{i}" for i in range(3, 6)]
    assert {r for _, r in rejected} == {"host-unreachable"}
    assert f.pending == 0
    f.close()


def test_success_resets_backoff(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0, backoff_s=1.0)
    f.add([f"{A}/{i}" for i in range(4)], depth=0)
    (t,) = f.next_ready(0.0, 5)
    f.finish(t, 0.0, failure=Failure.SERVER)
    (t,) = f.next_ready(1.0, 5)
    f.finish(t, 1.0)  # a good response
    assert f.next_wake() is None and len(f.next_ready(1.0, 5)) == 1
    f.close()


def test_per_ip_hosts_share_one_budget(tmp_path: Path) -> None:
    f, _ = make(
        tmp_path,
        min_delay_s=1.0,
        per_ip=True,
        known_ips={"a.test": "10.0.0.1", "b.test": "10.0.0.1"},
    )
    f.add([f"{A}/1", f"{A}/2", f"{B}/1", f"{B}/2"], depth=0)
    first = f.next_ready(0.0, 5)
    assert len(first) == 1  # one connection for the shared IP
    f.finish(first[0], 0.5)
    assert f.next_ready(1.0, 5) == []  # the IP's delay runs from the end of that response
    times = []
    now = 1.5
    while f.pending:
        for t in f.next_ready(now, 5):
            times.append(now)
            f.finish(t, now)
        now = f.next_wake() or now
    assert times == [1.5, 2.5, 3.5]


def test_resolve_entries_become_known_addresses_only_for_per_ip(tmp_path: Path) -> None:
    """Issue 29: the host -> address map of fetch.resolve (a dict of every entry) is kept only
    when per-IP politeness uses it."""
    from frontier_crawl.config import parse

    raw: dict[str, Any] = {
        "crawl": {"seeds": [f"{A}/"], "output_dir": str(tmp_path)},
        "fetch": {"resolve": ["a.test:80:10.0.0.1", "B.test:80:[::1]"]},
    }
    assert FrontierOptions.from_settings(parse(raw)).known_ips == {}
    raw["politeness"] = {"per_ip": True}
    assert FrontierOptions.from_settings(parse(raw)).known_ips == {
        "a.test": "10.0.0.1", "b.test": "::1",
    }  # fmt: skip


def test_per_ip_group_learned_from_first_response(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=1.0, per_ip=True)
    f.add([f"{A}/1", f"{A}/2", f"{B}/1", f"{B}/2"], depth=0)
    a, b = f.next_ready(0.0, 5)  # IPs unknown yet: one first request each
    f.finish(a, 0.0, ip="10.0.0.9")
    f.finish(b, 0.2, ip="10.0.0.9")
    assert f.next_ready(1.0, 5) == []  # a's own delay is over, but the IP's runs to 1.2
    assert len(f.next_ready(1.2, 5)) == 1  # and then one request for both hosts
    f.close()


def test_per_ip_count_includes_requests_sent_before_the_group_was_known(
    tmp_path: Path,
) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0, per_ip=True, connections_per_host=2)
    f.add([f"{h}/{i}" for i in range(6) for h in (A, B)], depth=0)
    first = f.next_ready(0.0, 10)  # IPs unknown: two requests to each host
    assert len(first) == 4
    for t in first:
        f.finish(t, 0.0, ip="10.0.0.9")
    in_flight = 0
    now = 0.0
    while f.pending:  # from now on the IP's two connections are shared by both hosts
        got = f.next_ready(now, 10)
        in_flight += len(got)
        assert in_flight <= 2
        for t in got:
            f.finish(t, now, ip="10.0.0.9")
            in_flight -= 1
        now += 0.1
    f.close()


def test_per_ip_group_joined_with_requests_in_flight(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0, per_ip=True, connections_per_host=2)
    f.add([f"{h}/{i}" for i in range(6) for h in (A, B)], depth=0)
    a1, a2, b1, b2 = sorted(f.next_ready(0.0, 10), key=lambda t: t.url)
    f.finish(a1, 0.0, ip="10.0.0.9")  # A joins with a2 still in flight
    f.finish(b1, 0.0, ip="10.0.0.9")  # B joins with b2 still in flight
    assert f.next_ready(0.1, 10) == []  # the IP has its two requests open (a2, b2)
    f.finish(a2, 0.1, ip="10.0.0.9")
    f.finish(b2, 0.1, ip="10.0.0.9")
    assert len(f.next_ready(0.2, 10)) == 2  # never more than two, never a negative count
    f.close()


def test_traps_are_recorded_once(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, max_depth=2, limits={"max_repeated_segments": 2})
    trap = f"{A}/cal/cal/cal/x"
    assert f.add([trap, f"{A}/ok"], depth=1) == 1
    assert f.add([trap], depth=1) == 0
    assert f.add([f"{A}/deep"], depth=3) == 0
    assert rejected == [(trap, "max-repeated-segments"), (f"{A}/deep", "max-depth")]
    f.close()


def test_max_pages_per_host(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, limits={"max_pages_per_host": 2})
    assert f.add([f"{A}/{i}" for i in range(4)] + [f"{B}/1"], depth=0) == 3
    assert [r for _, r in rejected] == ["max-pages-per-host"] * 2
    f.close()


def test_admission_limits_hold_across_a_restart(tmp_path: Path) -> None:
    """crawl.max_pages and max_pages_per_host count what earlier runs admitted too."""
    f, _ = make(tmp_path, max_pages=5, limits={"max_pages_per_host": 2})
    assert f.add([f"{A}/{i}" for i in range(4)] + [f"{B}/1"], depth=0) == 3
    f.close()
    f, rejected = make(tmp_path, max_pages=5, limits={"max_pages_per_host": 2})
    assert f.view.admitted == 3
    assert f.add([f"{A}/x", f"{A}/y"], depth=0) == 0  # A had its 2 before the restart
    assert [r for _, r in rejected] == ["max-pages-per-host"] * 2
    assert f.add([f"{B}/2", f"{B}/3"], depth=0) == 1  # B: one more, to its 2
    assert f.add([f"http://a.test:8080/{i}" for i in range(3)], depth=0) == 1  # max_pages 5
    f.close()


def test_completion_without_mark_done_is_fetched_again_after_a_restart(tmp_path: Path) -> None:
    """complete(mark_done=False) releases the host at once, but the URL stays unfinished in
    LMDB until mark_done: a restart in between hands it out again (the engine's WARC wait)."""
    f, _ = make(tmp_path, min_delay_s=0.0)
    with f.batch():
        f.add([f"{A}/1", f"{A}/2", f"{A}/3"], depth=0)
    tickets: list[Ticket] = []
    with f.batch():
        for now in (0.0, 1.0, 2.0):
            (t,) = f.next_ready(now, 1)  # one at a time: the host must have been released
            f.finish(t, now, mark_done=False)
            tickets.append(t)
        f.mark_done([tickets[0].key])
    assert f.pending == 0  # nothing queued or in flight: the crawl could end here
    with f.batch():
        f.mark_done([tickets[1].key])  # in a later transaction, as the engine does
    f.close()
    g, _ = make(tmp_path, min_delay_s=0.0)
    assert urls(g.next_ready(10.0, 5)) == [f"{A}/3"]
    g.close()


def test_identity_of_another_layout_is_refused(tmp_path: Path) -> None:
    f, _ = make(tmp_path)
    f.close()
    identity = tmp_path / "state" / "identity.json"
    identity.write_text(json.dumps({"layout_version": LAYOUT_VERSION + 1}))
    with pytest.raises(StateMismatch, match=f"layout version {LAYOUT_VERSION + 1}"):
        make(tmp_path)
    identity.write_text(json.dumps({"layout_version": LAYOUT_VERSION}))
    g, _ = make(tmp_path, min_delay_s=5.0, memory_urls=7)  # tunables may change
    g.close()


def test_state_of_a_version_with_a_bloom_filter_resumes_exactly(tmp_path: Path) -> None:
    """A state directory as versions with a Bloom filter left it: an identity pinning the
    filter's sizing, its snapshot (and a temporary file, here a symbolic link to a file
    outside that must survive) beside LMDB, and the digest log ``seen_recent`` in it. It
    opens; the leftovers are removed; the queue and the seen-set go on exactly."""
    f, _ = make(tmp_path, min_delay_s=0.0)
    with f.batch():
        assert f.add([f"{A}/{i}" for i in range(6)], depth=0) == 6
    with f.batch():
        done = f.next_ready(0.0, 1)
        f.finish(done[0], 0.0)
    f.close()
    state = tmp_path / "state"
    identity = state / "identity.json"
    identity.write_text(json.dumps({"layout_version": LAYOUT_VERSION, "seen_capacity": 10_000,
                                    "seen_error_rate": 1e-6}))  # fmt: skip
    (state / "seen.bloom").write_bytes(b"FCSEEN02" + bytes(64))
    outside = tmp_path / "not-the-crawls"
    outside.write_bytes(b"keep me")
    (state / "seen.bloom.tmp").symlink_to(outside)
    env = open_env(state / "frontier.lmdb", 1 << 26)
    with env.begin(write=True) as txn:
        log_db = env.open_db(b"seen_recent", txn=txn)
        txn.put((7).to_bytes(8, "big"), url_digest(f"{A}/0") + url_digest(f"{A}/1"), db=log_db)
    env.close()

    g, _ = make(tmp_path, min_delay_s=0.0)
    assert not (state / "seen.bloom").exists() and not (state / "seen.bloom.tmp").is_symlink()
    assert outside.read_bytes() == b"keep me"
    assert g.view.seen_stats()["count"] == 6
    assert g.pending == 5
    with g.batch():
        assert g.add([f"{A}/{i}" for i in range(8)], depth=0) == 2  # 6 and 7 only
    fetched: list[str] = []
    with g.batch():
        for now in range(10, 30):
            for t in g.next_ready(float(now), 1):
                g.finish(t, float(now))
                fetched.append(t.url)
    assert g.pending == 0
    assert sorted(fetched + urls(done)) == sorted(f"{A}/{i}" for i in range(8))  # each once
    g.close()
    env = open_env(state / "frontier.lmdb", 1 << 26)
    with env.begin() as txn:
        assert txn.get(b"seen_recent") is None
    env.close()


def test_blobs_are_durable(tmp_path: Path) -> None:
    f, _ = make(tmp_path)
    with f.batch():
        f.save_blob("x", b"hello")
    f.close()
    g, _ = make(tmp_path)
    assert g.load_blob("x") == b"hello" and g.load_blob("y") is None
    g.close()


def test_resume_keeps_block_progress_retries_and_referrers(tmp_path: Path) -> None:
    """Queue blocks survive a restart URL by URL: finished URLs stay finished, a retry keeps
    its attempt, unfinished ones come back in FIFO order with their referrers (also one on
    another host, stored by host id); completions of an aborted batch are simply redone."""
    f, _ = make(tmp_path, memory_urls=4, min_delay_s=0.0)
    with f.batch():
        f.add([f"{B}/page"], depth=0)
        f.add([f"{A}/{i}" for i in range(10)], depth=1, referrer=f"{B}/page")
        f.add([f"{A}/x/{i}" for i in range(3)], depth=2, referrer=f"{A}/x/")
    done: list[str] = []
    now = 0.0
    with f.batch():
        for _ in range(3):
            for t in f.next_ready(now, 5):
                if t.url == f"{A}/1" and t.attempt == 0:
                    f.retry(t, now, delay_s=100.0)  # not again before the restart
                else:
                    f.finish(t, now)
                    done.append(t.url)
            now += 1.0
    assert f"{A}/0" in done and f"{B}/page" in done and f"{A}/1" not in done
    with pytest.raises(RuntimeError), f.batch():
        for t in f.next_ready(now, 5):
            f.finish(t, now)  # lost with the aborted transaction: fetched again
        raise RuntimeError("abort")
    f.close()
    g, _ = make(tmp_path, memory_urls=4, min_delay_s=0.0)
    expected = 14 - len(done)
    assert g.pending == expected
    got: list[Ticket] = []
    now = 0.0
    while g.pending:
        for t in g.next_ready(now, 5):
            got.append(t)
            g.finish(t, now)
        now += 1.0
    queued = {f"{B}/page"} | {f"{A}/{i}" for i in range(10)} | {f"{A}/x/{i}" for i in range(3)}
    assert sorted(t.url for t in got) == sorted(queued - set(done))
    a_urls = [t.url for t in got if t.url.startswith(f"{A}/") and "/x/" not in t.url]
    assert a_urls == sorted(a_urls, key=lambda u: int(u.rsplit("/", 1)[1]))  # FIFO
    by_url = {t.url: t for t in got}
    assert by_url[f"{A}/1"].attempt == 1
    assert all(by_url[u].referrer == f"{B}/page" for u in a_urls)
    assert all(by_url[f"{A}/x/{i}"].referrer == f"{A}/x/" for i in range(3))
    g.close()
