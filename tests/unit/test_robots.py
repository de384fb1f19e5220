"""robots.txt rules (protego behind our group selection) and the frontier's robots.txt life
cycle on a test clock: refresh while busy, the 24 h cap, stale copies, 429 holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier_crawl.config import parse
from frontier_crawl.config.settings import PolitenessSection
from frontier_crawl.frontier import HostState
from frontier_crawl.frontier.robots import MAX_ROBOTS_TTL_S, RobotsCache, Rules, select_groups
from frontier_crawl.output import config_warnings
from tests.unit.test_frontier import A, make

DAY = 86_400.0
GROUPS = (
    b"User-agent: example\nDisallow: /example\n\n"
    b"User-agent: fc\nDisallow: /fc\n\n"
    b"User-agent: *\nDisallow: /star\n"
)


def allowed(token: str, body: bytes, path: str) -> bool:
    return Rules(token, body).allowed(f"{A}{path}")


def test_robots_point_1_utf8_bom_is_stripped() -> None:
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /private\n"
    assert not allowed("testbot", body, "/private")
    assert allowed("testbot", body, "/public")


@pytest.mark.parametrize(
    ("body", "denied"),
    [
        (GROUPS, "/star"),  # neither 'example' (a word of the UA's comment) nor 'fc' (a prefix)
        (GROUPS + b"\nUser-agent: FC-EVAL\nDisallow: /mine\n", "/mine"),  # case-insensitive
        (GROUPS + b"\nUser-agent: fc-eval/2.0\nDisallow: /mine\n", "/mine"),  # token of the value
        (GROUPS + b"\nuser agent fc-eval\nDisallow: /mine\n", "/mine"),  # protego's loose form
        (b"User-agent: fc-evaluator\nDisallow: /\n", ""),  # a longer token is another crawler
        (b"User-agent: * (everyone)\nDisallow: /star\n", "/star"),  # '*' then words: global
    ],
)
def test_robots_point_2_groups_match_the_product_token(body: bytes, denied: str) -> None:
    for path in ("/example", "/fc", "/star", "/mine", "/"):
        assert allowed("fc-eval", body, path) is (path != denied), path


def test_select_groups_leaves_other_lines_alone() -> None:
    text = "User-agent: a\nUser-agent: fc-eval # us\nDisallow: /x # no\nSitemap: http://a/s\n"
    assert select_groups(text, "fc-eval").splitlines() == [
        "User-agent: (not-us)", "User-agent: fc-eval", "Disallow: /x # no", "Sitemap: http://a/s"
    ]  # fmt: skip


def test_robots_point_2_product_token_from_settings() -> None:
    ua = "fc-eval/1.0 (+http://example.org/bot)"
    assert PolitenessSection(user_agent=ua).product_token == "fc-eval"
    assert PolitenessSection(user_agent=ua, robots_token="Other_Bot").product_token == "Other_Bot"
    with pytest.raises(ValueError, match=r"^robots_token: 'bot/1' is not a product token"):
        PolitenessSection(robots_token="bot/1")
    with pytest.raises(ValueError, match=r"^user_agent: its product token 'bot2' has"):
        PolitenessSection(user_agent="bot2/1.0")


def test_robots_point_3_rules_are_refreshed_without_holding_the_host(tmp_path: Path) -> None:
    """Two connections: the refresh takes one request slot, the other goes on meanwhile with
    the old rules; the new rules apply from the answer on."""
    f, rejected = make(tmp_path, obey_robots=True, min_delay_s=0.0, connections_per_host=2,
                       robots_ttl_s=100.0)  # fmt: skip
    f.add([f"{A}/{i}" for i in range(6)] + [f"{A}/new/{i}" for i in range(2)], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 200, b"User-agent: *\nDisallow: /none\n")
    first = f.next_ready(1.0, 5)
    assert [t.robots for t in first] == [False, False]
    for t in first:
        f.finish(t, 1.0)
    refresh, page = f.next_ready(100.0, 5)  # due: robots.txt again, and a page beside it
    assert refresh.robots and not page.robots
    f.finish(page, 100.0)
    (other,) = f.next_ready(100.0, 5)  # the host is not held while robots.txt is in flight
    assert not other.robots
    f.robots_done(refresh, 100.5, 200, b"User-agent: *\nDisallow: /new\n")
    f.finish(other, 100.5)
    got = f.next_ready(101.0, 5)
    assert [t.url for t in got] == [f"{A}/4", f"{A}/5"]
    for t in got:
        f.finish(t, 101.0)
    assert f.next_ready(102.0, 5) == []
    assert f.pending == 0
    assert rejected == [(f"{A}/new/0", "robots-denied"), (f"{A}/new/1", "robots-denied")]
    f.close()


def test_robots_point_3_ttl_is_capped_at_24_hours(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True, min_delay_s=0.0, robots_ttl_s=10 * DAY)
    f.add([f"{A}/{i}" for i in range(3)], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 200, b"User-agent: *\nDisallow: /none\n")
    (page,) = f.next_ready(MAX_ROBOTS_TTL_S - 1, 5)
    assert not page.robots
    f.finish(page, MAX_ROBOTS_TTL_S - 1)
    (again,) = f.next_ready(MAX_ROBOTS_TTL_S, 5)
    assert again.robots
    f.close()
    assert MAX_ROBOTS_TTL_S == DAY
    long = parse({"crawl": {"seeds": [f"{A}/"]}, "politeness": {"robots_ttl_s": 10 * DAY}})
    assert config_warnings(long) == [
        "politeness.robots_ttl_s = 864000 acts as 86400: robots.txt was fetched again at least "
        "every 24 hours (RFC 9309 2.4)"
    ]


def test_robots_point_6_429_holds_the_host_for_its_retry_after(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, obey_robots=True, min_delay_s=0.0, robots_retry_s=1.0)
    f.add([f"{A}/private", f"{A}/ok"], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 429, b"", retry_after="300")  # capped at max_retry_delay_s (300)
    assert f.next_ready(299.0, 5) == [] and f.next_wake() == 300.0
    (again,) = f.next_ready(300.0, 5)
    assert again.robots
    f.robots_done(again, 300.0, 200, b"User-agent: *\nDisallow: /private\n")
    assert [t.url for t in f.next_ready(300.0, 5)] == [f"{A}/ok"]
    assert rejected == [(f"{A}/private", "robots-denied")]
    f.close()


def test_robots_point_7_the_copy_at_hand_stands_in_while_unreachable(tmp_path: Path) -> None:
    """A refresh that finds robots.txt unreachable keeps the old rules, and is retried
    (robots_retry_s, doubling) without retiring the host; past robots_stale_s the copy is no
    longer used: the host waits for robots.txt, and is retired after robots_attempts."""
    f, rejected = make(tmp_path, obey_robots=True, min_delay_s=0.0, robots_ttl_s=100.0,
                       robots_stale_s=50.0, robots_retry_s=10.0, robots_attempts=2)  # fmt: skip
    f.add([f"{A}/private"] + [f"{A}/{i}" for i in range(5)], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 200, b"User-agent: *\nDisallow: /private\n")
    (page,) = f.next_ready(0.0, 5)
    f.finish(page, 0.0)
    (refresh,) = f.next_ready(100.0, 5)
    f.robots_done(refresh, 100.0, 503, b"")  # robots_attempts (2) not a limit here
    (page,) = f.next_ready(100.0, 5)  # crawls on with the copy
    assert not page.robots
    f.finish(page, 100.0)
    (refresh,) = f.next_ready(110.0, 5)  # retried after robots_retry_s
    assert refresh.robots
    f.robots_done(refresh, 110.0, 0, b"")  # no answer: the second failure in a row
    assert f.view.host_state(A) is not HostState.RETIRED
    (page,) = f.next_ready(110.0, 5)
    f.finish(page, 110.0)
    (refresh,) = f.next_ready(130.0, 5)  # 20 s later (doubled)
    f.robots_done(refresh, 151.0, 503, b"")  # the copy is 151 s old: past ttl + stale
    assert f.view.host_state(A) is HostState.RETIRED
    assert {r for _, r in rejected} == {"robots-denied", "robots-unavailable"}
    assert (f"{A}/private", "robots-denied") in rejected
    f.close()


def test_robots_cache_ages_copies_by_its_clock(tmp_path: Path) -> None:
    """The disk cache dates copies by the clock it is given (the wall clock by default): their
    age, and their end once ttl_s + stale_s have passed, follow it."""
    now = [1_000_000.0]
    cache = RobotsCache(tmp_path / "robots", "fc", ttl_s=10.0, stale_s=5.0, clock=lambda: now[0])
    try:
        stored = cache.store(A, 200, b"User-agent: *\nDisallow: /private\n")
        assert stored is not None and stored.fetched_at == now[0]
        now[0] += 12.5
        hit = cache.get(A)
        assert hit is not None and hit[1] == 12.5 and not hit[0].allowed(f"{A}/private")
        now[0] += 3.0  # 15.5 s old: past ttl_s + stale_s
        assert cache.get(A) is None
    finally:
        cache.close()
