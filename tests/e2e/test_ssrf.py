"""Every request goes through scope and the address policy (issue 18, item 1).

Each test crawls scripted servers on loopback and checks, from the servers' own request logs,
what the crawler asked for: robots.txt redirects are hops of their own (scope, address
policy), and a name in scope that resolves to an address outside the allowed categories is
never connected to (``address-refused``), whatever the names resolve to.

Every connection target here is on 127.0.0.0/8, so not one packet leaves the machine even if
the policy regresses (the refused-address tests then fail on the target server's own log).
For a loopback address to be refused, loopback must not be an allowed category: the seed is
``localhost`` (libcurl resolves that name itself, with no ``fetch.resolve`` entry, so only
that host is allowed, not its category), and the target, ``meta.localhost`` in the seed's
scope, is mapped by ``fetch.resolve`` to 127.0.0.2, where a server logs what it is asked.
Link-local, private and the other categories are refused by the same code; they are covered
without traffic by tests/unit/test_address_policy.py and, in a network namespace, by
tests/net/test_addresses_netns.py.
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
SEED = "localhost"  #: resolved by libcurl itself: the seed's host only is allowed, not loopback
INNER = f"meta.{SEED}"  #: in the seed's scope, mapped by fetch.resolve to...
REFUSED = "127.0.0.2"  #: ...the address of a service the crawler must never reach


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
    """A hop to a name in scope that resolves to a refused address (loopback, but not the
    seed's host) is refused before any connection (the hop's line says address-refused, the
    server there is never asked, nothing of it is archived), and robots.txt is unavailable."""
    with ScriptedServer(everything, address=REFUSED) as inner:
        target = f"http://{INNER}:{inner.port}/robots.txt"
        moved = Answer(301, b"", (("Location", target),))
        with ScriptedServer(site(moved)) as srv:
            s = crawl_settings(
                tmp_path, [srv.url(SEED, "/")], inner.resolve(INNER), fetch={"retries": 0}
            )
            Engine(s).run()
            asked = sorted((e.host, e.path) for e in srv.log())
        assert inner.log() == [], "the refused address was connected to"
    out = tmp_path / "out"
    got = {x["url"]: x for x in lines(out)}
    hop = got[target]
    assert (hop["outcome"], hop["error"], hop["status"]) == ("robots-txt", "address-refused", 0)
    assert got[srv.url(SEED, "/a")]["outcome"] == "fetched"
    assert asked == [(SEED, "/"), (SEED, "/a"), (SEED, "/robots.txt")]
    assert not [u for u in warc_uris(out) if INNER in u]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("obey_robots", [True, False])
@pytest.mark.parametrize("address", [REFUSED, f"::ffff:{REFUSED}"], ids=["ipv4", "ipv4-mapped"])
def test_a_name_in_scope_resolving_to_a_refused_address_is_refused(
    tmp_path: Path, obey_robots: bool, address: str
) -> None:
    """A link to a name in scope that resolves (fetch.resolve, as DNS would) to a refused
    address, plain or IPv4-mapped (loopback here, the seed's host only being allowed):
    address-refused, recorded once per URL, never retried, the host retired (its other URLs
    get the same outcome, unrequested), the server there never asked, nothing archived."""
    with ScriptedServer(everything, address=REFUSED) as inner:
        base = f"http://{INNER}:{inner.port}"

        def script(host: str, path: str, nth: int) -> Answer:
            if path == "/":
                return page(f"{base}/latest/meta-data/", f"{base}/other")
            return page()

        with ScriptedServer(script) as srv:
            shown = f"[{address}]" if ":" in address else address
            s = crawl_settings(
                tmp_path, [srv.url(SEED, "/")], [f"{INNER}:{inner.port}:{shown}"],
                politeness={"obey_robots": obey_robots}, fetch={"retries": 2},
            )  # fmt: skip
            report = Engine(s).run()
        assert inner.log() == [], "the refused address was connected to"
    out = tmp_path / "out"
    entries = [x for x in lines(out) if x["url"].startswith(f"{base}/")]
    pages = {x["url"]: x["outcome"] for x in entries if not x["url"].endswith("/robots.txt")}
    assert pages == {
        f"{base}/latest/meta-data/": "address-refused",
        f"{base}/other": "address-refused",
    }
    assert len(entries) == len(pages) + obey_robots  # no retry: one line each (+ robots.txt)
    assert all(x["status"] == 0 for x in entries)
    if obey_robots:
        hop = next(x for x in entries if x["url"].endswith("/robots.txt"))
        assert (hop["outcome"], hop["error"]) == ("robots-txt", "address-refused")
    assert not [u for u in warc_uris(out) if INNER in u]
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
