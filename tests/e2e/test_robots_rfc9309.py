"""robots.txt as RFC 9309 says (issue 10, points 1-7), each shown from the scripted server's
own request log: which paths the crawler asked for, in which order, and when."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.demo.server import CLOCK_TOLERANCE_S, RequestLogEntry
from frontier_crawl.engine import Engine
from tests.scripted_server import (
    NOT_FOUND,
    Answer,
    Script,
    ScriptedServer,
    crawl_settings,
    page,
)

HOST = "r.test"
TEXT = (("Content-Type", "text/plain"),)


def settings(tmp_path: Path, srv: ScriptedServer, seeds: list[str], **sections: Any) -> Any:
    return crawl_settings(
        tmp_path, [srv.url(HOST, s) for s in seeds], srv.resolve(HOST), **sections
    )


def crawl(tmp_path: Path, script: Script, seeds: list[str], **sections: Any) -> tuple[
    list[RequestLogEntry], dict[str, str], dict[str, Any]
]:  # fmt: skip
    """Crawl ``seeds`` of HOST against ``script``: (server log in order, outcome per path,
    report)."""
    with ScriptedServer(script) as srv:
        report = Engine(settings(tmp_path, srv, seeds, **sections)).run()
        log = sorted(srv.log(), key=lambda e: e.started)
    return log, outcomes(tmp_path / "out"), report


def outcomes(out: Path) -> dict[str, str]:
    """Outcome of each page path in the crawl log (robots.txt lines left out)."""
    lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
    return {
        "/" + x["url"].split("/", 3)[3]: x["outcome"] for x in lines if x["outcome"] != "robots-txt"
    }


def paths(log: list[RequestLogEntry]) -> list[str]:
    return [e.path for e in log]


def robots_then(robots: Answer | Script, *links: str) -> Script:
    """robots.txt answered by ``robots`` (an Answer, or a script of its own), ``/`` linking to
    ``links``, every other page empty."""

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt":
            return robots if isinstance(robots, Answer) else robots(host, path, nth)
        return page(*links) if path == "/" else page()

    return script


@pytest.mark.timeout(30)
def test_robots_point_1_utf8_bom_is_stripped(tmp_path: Path) -> None:
    robots = Answer(200, b"\xef\xbb\xbfUser-agent: *\nDisallow: /private\n", TEXT)
    log, got, _ = crawl(tmp_path, robots_then(robots, "/private", "/public"), ["/"])
    assert paths(log) == ["/robots.txt", "/", "/public"], paths(log)
    assert got["/private"] == "robots-denied"


@pytest.mark.timeout(30)
def test_robots_point_2_groups_match_the_product_token(tmp_path: Path) -> None:
    """The UA's product token (``fc-eval``) selects the group, case-insensitively: not a word
    of its comment (``example``), not a prefix of the token (``fc``); else ``*``."""
    body = (b"User-agent: example\nDisallow: /\n\nUser-agent: fc\nDisallow: /\n\n"
            b"User-agent: *\nDisallow: /private\n")  # fmt: skip
    ua = {"user_agent": "fc-eval/1.0 (+http://example.org/bot)"}
    log, got, _ = crawl(tmp_path / "a", robots_then(Answer(200, body, TEXT), "/private", "/public"),
                        ["/"], politeness=ua)  # fmt: skip
    assert paths(log) == ["/robots.txt", "/", "/public"], paths(log)
    assert got["/private"] == "robots-denied"
    # its own group, written in another case, wins over '*'
    own = body + b"\nUser-agent: FC-Eval\nDisallow: /public\n"
    log, got, _ = crawl(tmp_path / "b", robots_then(Answer(200, own, TEXT), "/private", "/public"),
                        ["/"], politeness=ua)  # fmt: skip
    assert paths(log) == ["/robots.txt", "/", "/private"], paths(log)
    # politeness.robots_token names the group instead of the UA's first token
    token = {**ua, "robots_token": "example"}
    log, got, _ = crawl(tmp_path / "c", robots_then(Answer(200, body, TEXT), "/private", "/public"),
                        ["/"], politeness=token)  # fmt: skip
    assert paths(log) == ["/robots.txt"], paths(log)
    assert got["/"] == "robots-denied"


@pytest.mark.serial  # a 0.5 s bound on gaps and a 1 s TTL in a 3 s crawl: no CPU-hungry neighbour
@pytest.mark.timeout(40)
def test_robots_point_3_rules_are_refreshed_while_the_host_stays_busy(tmp_path: Path) -> None:
    """robots_ttl_s = 1 (shortened from a day so that the refresh falls inside a 3 s crawl):
    robots.txt is fetched again while the host crawls on, and its new rules apply."""
    links = [f"/p{i}" for i in range(40)] + [f"/late{i}" for i in range(10)]

    def robots(host: str, path: str, nth: int) -> Answer:
        return Answer(200, b"User-agent: *\nDisallow: /none\n" if nth == 1 else
                      b"User-agent: *\nDisallow: /late\n", TEXT)  # fmt: skip

    log, got, report = crawl(tmp_path, robots_then(robots, *links), ["/"],
                             politeness={"robots_ttl_s": 1.0, "min_delay_s": 0.05})  # fmt: skip
    assert report["complete"] is True
    fetches = [i for i, e in enumerate(log) if e.path == "/robots.txt"]
    assert len(fetches) >= 2, paths(log)
    second = fetches[1]
    # due at 1 s after the first, and asked while the host still had queued pages: pages were
    # fetched right before and right after it, never held (gaps of the 0.05 s delay)
    # (from the first answer's start: its server thread stamps `finished` after its write
    # returns, which can be after the crawler has read the answer and started its TTL)
    assert log[second].started - log[fetches[0]].responding >= 1.0 - CLOCK_TOLERANCE_S
    # (the page before may be the seed, "/", when a loaded machine took the TTL to reach it)
    assert log[second - 1].path != "/robots.txt" and log[second + 1].path.startswith("/p")
    for before, after in ((log[second - 1], log[second]), (log[second], log[second + 1])):
        assert after.started - before.responding < 0.5, paths(log)
    # the new rules apply to every page requested after that response
    assert not any(e.path.startswith("/late") for e in log[second + 1 :]), paths(log)
    assert any(got[p] == "robots-denied" for p in links[-10:])


@pytest.mark.timeout(30)
def test_robots_point_4_more_than_five_redirects_is_unavailable(tmp_path: Path) -> None:
    """A 7-hop chain: the first five hops are followed, then the file is unavailable: allow
    all (no retry of robots.txt, the host is not retired)."""

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt" or path.startswith("/hop"):
            n = 0 if path == "/robots.txt" else int(path[4:])
            if n < 7:
                return Answer(301, b"", (("Location", f"/hop{n + 1}"),))
            return Answer(200, b"User-agent: *\nDisallow: /\n", TEXT)
        return page("/a") if path == "/" else page()

    log, got, report = crawl(tmp_path, script, ["/"])
    assert paths(log) == ["/robots.txt", "/hop1", "/hop2", "/hop3", "/hop4", "/hop5", "/", "/a"]
    assert got == {"/": "fetched", "/a": "fetched"}
    assert report["complete"] is True


@pytest.mark.timeout(30)
def test_robots_point_5_a_robots_txt_over_max_body_bytes_is_parsed_up_to_500_kib(
    tmp_path: Path,
) -> None:
    """A 600 KiB robots.txt with max_body_bytes = 100000: its first 512 KiB are read and
    parsed (the Disallow at the top applies), the rest ignored (the Disallow past 512 KiB
    does not), and robots.txt is asked for once."""
    head = b"User-agent: *\nDisallow: /private\n"
    pad = b"# " + b"x" * 1021 + b"\n"  # 1 KiB comment lines
    body = head + pad * 600 + b"Disallow: /beyond\n"
    log, got, _ = crawl(tmp_path, robots_then(Answer(200, body, TEXT), "/private", "/beyond"),
                        ["/"], fetch={"max_body_bytes": 100_000})  # fmt: skip
    assert paths(log) == ["/robots.txt", "/", "/beyond"], paths(log)
    assert got == {"/": "fetched", "/private": "robots-denied", "/beyond": "fetched"}
    # archived as read: its first 512 KiB, marked truncated for its length
    (warc,) = (tmp_path / "out" / "warc").glob("*.warc.gz")
    found = []
    with warc.open("rb") as fh:
        for record in ArchiveIterator(fh):
            uri = record.rec_headers.get_header("WARC-Target-URI") or ""
            if record.rec_type == "response" and uri.endswith("/robots.txt"):
                found.append((record.rec_headers.get_header("WARC-Truncated"),
                              record.content_stream().read()))  # fmt: skip
    assert found == [("length", body[: 512 * 1024])]


@pytest.mark.timeout(30)
def test_robots_point_6_429_holds_the_host_until_retry_after(tmp_path: Path) -> None:
    """429 with Retry-After: 3600 for robots.txt, with fetch.max_retry_delay_s = 1 (shortened
    so the cap, not the hour, is waited out): nothing else is asked for until robots.txt is
    fetched again a capped second later, and then its rules apply."""

    def robots(host: str, path: str, nth: int) -> Answer:
        if nth == 1:
            return Answer(429, b"slow down", (("Retry-After", "3600"),))
        return Answer(200, b"User-agent: *\nDisallow: /private\n", TEXT)

    log, got, _ = crawl(tmp_path, robots_then(robots, "/private", "/public"), ["/"],
                        fetch={"max_retry_delay_s": 1.0})  # fmt: skip
    assert paths(log) == ["/robots.txt", "/robots.txt", "/", "/public"], paths(log)
    assert [e.status for e in log[:2]] == [429, 200]
    assert log[1].started - log[0].responding >= 1.0 - CLOCK_TOLERANCE_S
    assert got["/private"] == "robots-denied"


@pytest.mark.timeout(40)
def test_robots_point_7_a_cached_copy_is_used_while_robots_txt_is_unreachable(
    tmp_path: Path,
) -> None:
    """Run 1 caches robots.txt (robots_ttl_s = 1, shortened so that it is out of date for run
    2, whose wall clock runs 1.2 s ahead, as if it started that much later). In run 2
    robots.txt answers 503 every time: the cached copy applies (/private denied, /public
    fetched) instead of retiring the host."""
    down = [False]  # robots.txt answers 503 from run 2 on

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt":
            return (Answer(503, b"down", TEXT) if down[0] else
                    Answer(200, b"User-agent: *\nDisallow: /private\n", TEXT))  # fmt: skip
        return page("/private", "/public") if path == "/second" else page()

    common = {"politeness": {"robots_ttl_s": 1.0, "robots_attempts": 2}}
    with ScriptedServer(script) as srv:  # one server: robots.txt is cached by origin (port)
        Engine(settings(tmp_path, srv, ["/"], **common)).run()
        first = len(srv.log())
        down[0] = True
        later = Engine(settings(tmp_path, srv, ["/second"], **common),
                       wall_clock=lambda: time.time() + 1.2)  # fmt: skip
        report = later.run()
        log = sorted(srv.log()[first:], key=lambda e: e.started)
    got = outcomes(tmp_path / "out")
    assert paths(log)[0] == "/robots.txt" and log[0].status == 503
    assert "/private" not in paths(log) and {"/second", "/public"} <= set(paths(log)), paths(log)
    assert got["/second"] == "fetched" and got["/public"] == "fetched"
    assert got["/private"] == "robots-denied"
    assert report["complete"] is True


@pytest.mark.timeout(30)
def test_robots_not_found_still_allows_all(tmp_path: Path) -> None:
    log, _, _ = crawl(tmp_path, robots_then(NOT_FOUND, "/a"), ["/"])
    assert paths(log) == ["/robots.txt", "/", "/a"]
