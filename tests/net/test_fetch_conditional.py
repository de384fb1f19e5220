"""A request's own validators win over the HTTP cache's (fetch/fetcher.py ``_lookup``).

A revisit of a continuous crawl carries the last capture's ETag / Last-Modified (the
frontier's, engine/core.py ``_request``); with ``fetch.cache`` also on, the cache must not add
its own (a second If-None-Match, or a stale one) nor turn the 304 into its stored response:
the crawl asked its own question and gets the server's answer as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.fetch import Fetcher, FetchRequest, FetchResult
from tests.recrawl_site import RecrawlSite

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def site() -> Iterator[RecrawlSite]:
    with RecrawlSite(hosts=1) as s:
        yield s


def fetch(fetcher: Fetcher, req: FetchRequest) -> FetchResult:
    fetcher.submit(req)
    for _ in range(100):
        if results := fetcher.poll(0.2):
            return results[0]
    raise AssertionError(f"no result for {req.url}")


@pytest.mark.parametrize("cache", [True, False])
def test_the_requests_validators_are_sent_alone(
    tmp_path: Path, site: RecrawlSite, cache: bool
) -> None:
    url = site.url("h0.recrawl.test", "/static")
    with Fetcher(resolve=tuple(site.resolve_entries()),
                 cache_dir=tmp_path / "cache" if cache else None) as fetcher:  # fmt: skip
        first = fetch(fetcher, FetchRequest(url))
        assert first.status == 200 and first.header("etag") == '"static-0"'
        # a validator the server does not know: a full 200, the cache's own not sent
        other = fetch(fetcher, FetchRequest(url, headers=(("If-None-Match", '"other"'),)))
        assert other.status == 200 and other.not_modified is None and len(other.body) > 20_000
        # the right one: the server's 304 as it is (no stored response put in its place)
        mine = (
            ("If-None-Match", '"static-0"'),
            ("If-Modified-Since", first.header("last-modified") or ""),
        )
        same = fetch(fetcher, FetchRequest(url, headers=mine))
        assert same.status == 304 and same.not_modified is None and same.body == b""
        # without validators of its own, the cache (when on) makes the request conditional
        plain = fetch(fetcher, FetchRequest(url))
    hits = site.hits()
    assert [h.status for h in hits] == [200, 200, 304, 304 if cache else 200]
    assert hits[1].headers.get("if-none-match") == '"other"'
    assert "if-modified-since" not in hits[1].headers
    assert hits[2].headers.get("if-none-match") == '"static-0"'
    assert hits[2].headers.get("if-modified-since") == first.header("last-modified")
    assert (plain.not_modified is not None) is cache
    assert ("if-none-match" in hits[3].headers) is cache
