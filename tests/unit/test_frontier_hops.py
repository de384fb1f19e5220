"""robots.txt redirect hops through the frontier (scope) and host retirement (address-refused)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_frontier import A, make


def test_a_robots_redirect_in_scope_is_the_hosts_next_ticket(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True)
    f.add([f"{A}/page"], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    assert f.view.in_flight == 1
    assert f.robots_redirect(robots, "http://www.a.test/robots.txt")
    assert f.has_ready
    (hop,) = f.next_ready(0.0, 5)
    assert (hop.robots, hop.url, hop.origin, hop.hops) == (
        True, "http://www.a.test/robots.txt", robots.origin, 1,
    )  # fmt: skip
    assert f.view.in_flight == 1  # the same robots.txt fetch, still in flight
    assert f.next_ready(0.0, 5) == []  # the host still waits for its rules
    f.robots_done(hop, 1.0, 200, b"User-agent: *\nDisallow:\n")
    (page,) = f.next_ready(100.0, 5)
    assert page.url == f"{A}/page"
    f.close()


def test_a_robots_redirect_out_of_scope_is_refused(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True)
    f.add([f"{A}/page"], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    for target in ("http://127.0.0.1:8080/latest/meta-data/", "http://evil.test/robots.txt",
                   "file:///etc/passwd", "http://[::1]/"):  # fmt: skip
        assert not f.robots_redirect(robots, target), target
    assert not f.has_ready
    f.robots_done(robots, 1.0, 301, b"")  # the chain cut short: unavailable, allow all
    (page,) = f.next_ready(100.0, 5)
    assert page.url == f"{A}/page"
    f.close()


def test_retire_records_the_hosts_urls_and_later_ones(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, obey_robots=True)
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 1.0, 0, b"", retire="address-refused")
    assert sorted(rejected) == [(f"{A}/1", "address-refused"), (f"{A}/2", "address-refused")]
    f.add([f"{A}/3"], depth=1)
    assert rejected[-1] == (f"{A}/3", "address-refused")
    assert (f.pending, f.view.in_flight) == (0, 0)
    f.close()
