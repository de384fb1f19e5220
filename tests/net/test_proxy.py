"""``fetch.proxy``: crawls through a local HTTP forward proxy and a local SOCKS5 server.

The proxies (tests/hostile/proxy.py) log every request they relay and connect only to names
they map to 127.0.0.1; the origin server logs what reached it. A crawl went through a proxy
when the two logs agree. ``fetch.resolve`` also maps the site's name, so even a local lookup
(``socks5://``) never reaches a resolver.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from frontier_crawl.config import FetchSection, PolitenessSection, load
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import AddressPolicy, ErrorKind, Fetcher, FetchRequest, FetchResult
from tests.conftest import render_toml
from tests.hostile.proxy import HttpProxy, Socks5Proxy
from tests.hostile.server import Exchange, RawHttpServer

pytestmark = pytest.mark.timeout(60)

NAME = "site.test"
PAGES = {"/": b"<html><a href='/a'>a</a> <a href='/b'>b</a></html>", "/a": b"<html>a</html>",
         "/b": b"<html>b</html>"}  # fmt: skip


def serve_pages(ex: Exchange) -> None:
    body = PAGES.get(ex.request.path)
    ex.reply(200, body) if body is not None else ex.reply(404, b"not found\n")


@pytest.fixture
def origin() -> Iterator[RawHttpServer]:
    with RawHttpServer(serve_pages) as server:
        yield server


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_origin(ca: trustme.CA) -> Iterator[RawHttpServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(NAME).configure_cert(context)
    with RawHttpServer(serve_pages, tls=context) as server:
        yield server


@pytest.fixture
def http_proxy() -> Iterator[HttpProxy]:
    with HttpProxy({NAME: "127.0.0.1", "127.0.0.1": "127.0.0.1"}) as proxy:
        yield proxy


@pytest.fixture
def socks_proxy() -> Iterator[Socks5Proxy]:
    with Socks5Proxy({NAME: "127.0.0.1", "127.0.0.1": "127.0.0.1"}) as proxy:
        yield proxy


def crawl(
    tmp_path: Path, seed: str, port: int, proxy: str, **fetch: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    robots = fetch.pop("obey_robots", True)
    sections = {
        "crawl": {"seeds": [seed], "output_dir": "out"},
        "politeness": {"min_delay_s": 0.0, "obey_robots": robots},
        "fetch": {
            "connect_timeout_s": 2.0,
            "timeout_s": 5.0,
            "retries": 1,
            "retry_backoff_s": 0.05,
            "proxy": proxy,
            "resolve": [f"{NAME}:{port}:127.0.0.1"],
            **fetch,
        },
        "output": {"progress_interval_s": 0.0},
    }
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(sections))
    report = Engine(load(path)).run()
    lines = (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()
    return report, [json.loads(x) for x in lines]


def served_paths(server: RawHttpServer) -> list[str]:
    return sorted(h.path for h in server.hits())


def test_http_proxy(tmp_path: Path, origin: RawHttpServer, http_proxy: HttpProxy) -> None:
    port = origin.port
    report, _ = crawl(
        tmp_path, f"http://{NAME}:{port}/", port, f"http://127.0.0.1:{http_proxy.port}"
    )
    assert report["fetched"] == 3 and report["errors_by_kind"] == {}
    hits = http_proxy.hits()
    assert {(h.kind, h.allowed) for h in hits} == {("GET", True)}
    assert sorted(h.target for h in hits) == [
        f"http://{NAME}:{port}{p}" for p in served_paths(origin)
    ]
    assert served_paths(origin) == sorted(["/robots.txt", *PAGES])


def test_https_through_http_proxy_tunnel(
    tmp_path: Path, tls_origin: RawHttpServer, http_proxy: HttpProxy, ca: trustme.CA
) -> None:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    port = tls_origin.port
    report, _ = crawl(
        tmp_path,
        f"https://{NAME}:{port}/",
        port,
        f"http://127.0.0.1:{http_proxy.port}",
        ca_bundle=str(ca_file),
    )
    assert report["fetched"] == 3 and report["errors_by_kind"] == {}
    hits = http_proxy.hits()
    assert hits and {(h.kind, h.target, h.allowed) for h in hits} == {
        ("CONNECT", f"{NAME}:{port}", True)
    }
    assert served_paths(tls_origin) == sorted(["/robots.txt", *PAGES])


@pytest.mark.parametrize(("scheme", "seen_as"), [("socks5h", NAME), ("socks5", "127.0.0.1")])
def test_socks5_proxy(
    tmp_path: Path, origin: RawHttpServer, socks_proxy: Socks5Proxy, scheme: str, seen_as: str
) -> None:
    # socks5h: the proxy resolves (it gets the name); socks5: libcurl resolves locally, here
    # through the fetch.resolve entry, and sends the address
    port = origin.port
    report, _ = crawl(
        tmp_path, f"http://{NAME}:{port}/", port, f"{scheme}://127.0.0.1:{socks_proxy.port}"
    )
    assert report["fetched"] == 3 and report["errors_by_kind"] == {}
    hits = socks_proxy.hits()
    assert hits and {(h.kind, h.host, h.port, h.allowed) for h in hits} == {
        ("SOCKS5", seen_as, port, True)
    }
    assert served_paths(origin) == sorted(["/robots.txt", *PAGES])


def test_proxy_refusal_is_a_recorded_proxy_error(tmp_path: Path, socks_proxy: Socks5Proxy) -> None:
    # a name the proxy refuses to connect to (socks5h: never resolved by libcurl)
    report, lines = crawl(
        tmp_path,
        "http://refused.test:8080/",
        8080,
        f"socks5h://127.0.0.1:{socks_proxy.port}",
        obey_robots=False,
    )
    assert [(x["outcome"], x["error"]) for x in lines] == [("failed", "proxy-error")]
    assert report["errors_by_kind"] == {"proxy-error": 1}
    hits = socks_proxy.hits()
    assert [(h.host, h.allowed) for h in hits] == [("refused.test", False)] * 2  # retried once


def fetch_one(fetcher: Fetcher, url: str) -> FetchResult:
    fetcher.submit(FetchRequest(url))
    for _ in range(50):
        results = fetcher.poll(0.2)
        if results:
            return results[0]
    raise AssertionError("no result")


def test_refused_connect_tunnel_is_proxy_error(
    tls_origin: RawHttpServer, http_proxy: HttpProxy
) -> None:
    fetch = FetchSection(proxy=f"http://127.0.0.1:{http_proxy.port}", connect_timeout_s=2.0)
    with Fetcher.from_settings(fetch, PolitenessSection()) as fetcher:
        result = fetch_one(fetcher, f"https://refused.test:{tls_origin.port}/")
    assert result.error is ErrorKind.PROXY, result.error_detail
    assert [(h.kind, h.allowed) for h in http_proxy.hits()] == [("CONNECT", False)]


def test_a_proxy_on_loopback_is_used_whatever_the_address_policy(
    origin: RawHttpServer, http_proxy: HttpProxy
) -> None:
    """The proxy is the operator's choice: connections go to it though the policy refuses
    loopback. A target given as a refused literal address is not sent to the proxy."""
    fetch = FetchSection(proxy=f"http://127.0.0.1:{http_proxy.port}", connect_timeout_s=2.0)
    policy = AddressPolicy()  # public addresses only
    with Fetcher.from_settings(fetch, PolitenessSection(), addresses=policy) as fetcher:
        named = fetch_one(fetcher, f"http://{NAME}:{origin.port}/")
        literal = fetch_one(fetcher, f"http://127.0.0.1:{origin.port}/")
        metadata = fetch_one(fetcher, "http://169.254.169.254/latest/meta-data/")
    assert (named.status, named.error) == (200, None), named.error_detail
    assert literal.error is ErrorKind.ADDRESS_REFUSED and metadata.error is literal.error
    assert [h.target for h in http_proxy.hits()] == [f"http://{NAME}:{origin.port}/"]
