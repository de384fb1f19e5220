"""Every request goes through scope and the address policy (issue 18, item 1).

Each test crawls scripted servers on loopback and checks, from the servers' own request logs,
what the crawler asked for: robots.txt redirects are hops of their own (scope, address
policy), and a name in scope that resolves to an address outside the allowed categories is
never connected to (``address-refused``), whatever the names resolve to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.engine import Engine
from tests.scripted_server import Answer, Script, ScriptedServer, crawl_settings, page

SITE = "site.test"
TEXT = (("Content-Type", "text/plain"),)
METADATA = "169.254.169.254"  #: a cloud metadata service's address (link-local)


def lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]


def warc_uris(out: Path) -> list[str]:
    uris = []
    for path in sorted((out / "warc").glob("*.warc*")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if uri:
                    uris.append(uri)
    return uris


def site(robots: Answer) -> Script:
    """robots.txt answered with ``robots``; ``/`` links to ``/a``; other pages empty."""

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt":
            return robots
        return page("/a") if path == "/" else page()

    return script


def everything(host: str, path: str, nth: int) -> Answer:
    """An internal service: answers anything (what it must never be asked)."""
    return Answer(200, b'{"AccessKeyId": "AKIA-SECRET"}', TEXT)


@pytest.mark.timeout(30)
def test_a_robots_redirect_out_of_scope_is_never_requested(tmp_path: Path) -> None:
    """robots.txt of an in-scope host answers 301 to a loopback address outside the scope (a
    metadata-like service): that service is never asked, nothing of it is archived, and the
    chain cut short reads as "unavailable" (allow all), so the site is crawled."""
    with ScriptedServer(everything) as inner:
        target = f"http://127.0.0.1:{inner.port}/latest/meta-data/"
        moved = Answer(301, b"", (("Location", target),))
        with ScriptedServer(site(moved)) as srv:
            s = crawl_settings(tmp_path, [srv.url(SITE, "/")], srv.resolve(SITE))
            report = Engine(s).run()
            asked = [(e.host, e.path) for e in srv.log()]
        assert inner.log() == [], "the out-of-scope redirect target was requested"
    out = tmp_path / "out"
    assert not [u for u in warc_uris(out) if "127.0.0.1" in u or "meta-data" in u]
    got = {x["url"]: x["outcome"] for x in lines(out)}
    assert got[srv.url(SITE, "/")] == "fetched" and got[srv.url(SITE, "/a")] == "fetched"
    assert sorted(asked) == [(SITE, "/"), (SITE, "/a"), (SITE, "/robots.txt")]
    assert report["complete"] is True


@pytest.mark.timeout(30)
def test_a_robots_redirect_in_scope_is_a_request_of_its_own(tmp_path: Path) -> None:
    """A hop to another host in scope (``www.``) is fetched as a request to that host, its
    rules apply to the first host, and each hop has its crawl-log line and WARC record."""

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt" and host == SITE:
            return Answer(301, b"", (("Location", f"http://www.{SITE}:{srv.port}/robots.txt"),))
        if path == "/robots.txt":
            return Answer(200, b"User-agent: *\nDisallow: /a\n", TEXT)
        return page("/a") if path == "/" else page()

    with ScriptedServer(script) as srv:
        s = crawl_settings(tmp_path, [srv.url(SITE, "/")], srv.resolve(SITE, f"www.{SITE}"))
        Engine(s).run()
        asked = [(e.host, e.path) for e in sorted(srv.log(), key=lambda e: e.started)]
    assert asked == [(SITE, "/robots.txt"), (f"www.{SITE}", "/robots.txt"), (SITE, "/")]
    out = tmp_path / "out"
    got = {x["url"]: (x["outcome"], x["status"]) for x in lines(out)}
    assert got[srv.url(SITE, "/robots.txt")] == ("robots-txt", 301)
    assert got[srv.url(f"www.{SITE}", "/robots.txt")] == ("robots-txt", 200)
    assert got[srv.url(SITE, "/a")][0] == "robots-denied"
    assert srv.url(f"www.{SITE}", "/robots.txt") in warc_uris(out)


@pytest.mark.timeout(30)
def test_a_robots_redirect_to_a_refused_address_is_unavailable(tmp_path: Path) -> None:
    """A hop to a name in scope that resolves to the metadata address is refused before any
    connection (the hop's line says address-refused), and robots.txt is unavailable."""
    moved = Answer(301, b"", (("Location", f"http://meta.{SITE}/robots.txt"),))
    with ScriptedServer(site(moved)) as srv:
        resolve = [*srv.resolve(SITE), f"meta.{SITE}:80:{METADATA}"]
        s = crawl_settings(tmp_path, [srv.url(SITE, "/")], resolve, fetch={"retries": 0})
        Engine(s).run()
    got = {x["url"]: x for x in lines(tmp_path / "out")}
    hop = got[f"http://meta.{SITE}/robots.txt"]
    assert (hop["outcome"], hop["error"], hop["status"]) == ("robots-txt", "address-refused", 0)
    assert got[srv.url(SITE, "/a")]["outcome"] == "fetched"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("obey_robots", [True, False])
@pytest.mark.parametrize("address", [METADATA, "10.0.0.1", "::ffff:169.254.169.254"])
def test_a_name_in_scope_resolving_to_a_refused_address_is_refused(
    tmp_path: Path, obey_robots: bool, address: str
) -> None:
    """A link to a name in scope that resolves (fetch.resolve, as DNS would) to a link-local
    or private address, the seeds being on loopback: address-refused, recorded once per URL,
    never retried, the host retired (its other URLs get the same outcome, unrequested)."""
    inner = f"meta.{SITE}"

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/":
            return page(f"http://{inner}/latest/meta-data/", f"http://{inner}/other")
        return page()

    with ScriptedServer(script) as srv:
        shown = f"[{address}]" if ":" in address else address
        resolve = [*srv.resolve(SITE), f"{inner}:80:{shown}"]
        s = crawl_settings(
            tmp_path, [srv.url(SITE, "/")], resolve,
            politeness={"obey_robots": obey_robots}, fetch={"retries": 2},
        )  # fmt: skip
        report = Engine(s).run()
    entries = [x for x in lines(tmp_path / "out") if x["url"].startswith(f"http://{inner}/")]
    pages = {x["url"]: x["outcome"] for x in entries if not x["url"].endswith("/robots.txt")}
    assert pages == {
        f"http://{inner}/latest/meta-data/": "address-refused",
        f"http://{inner}/other": "address-refused",
    }
    assert len(entries) == len(pages) + obey_robots  # no retry: one line each (+ robots.txt)
    assert all(x["status"] == 0 for x in entries)
    assert report["address_refused"] == 2
    assert report["outcomes"]["address-refused"] == 2
    assert report["complete"] is True


@pytest.mark.timeout(30)
def test_api_seeds_go_through_scope(tmp_path: Path) -> None:
    """Seeds added by the operator (the control API's ``seeds``, ``ctl add-seeds``) are
    admitted like links: one outside the scope (a loopback service) is not, and never
    requested; one in scope is crawled."""
    from frontier_crawl.control.commands import Command

    with ScriptedServer(everything) as inner, ScriptedServer(site(Answer(404))) as srv:
        s = crawl_settings(tmp_path, [srv.url(SITE, "/")], srv.resolve(SITE))
        engine = Engine(s)
        outside = f"http://127.0.0.1:{inner.port}/latest/meta-data/"
        reply = engine.apply(Command("seeds", urls=(outside, srv.url(SITE, "/added"))), 0.0)
        assert (reply["given"], reply["admitted"]) == (2, 1)
        engine.run()
        assert inner.log() == []
        assert (SITE, "/added") in {(e.host, e.path) for e in srv.log()}
