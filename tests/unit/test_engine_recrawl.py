"""The engine's facts of a continuous crawl's visit (engine/core.py): the conditional headers of
a revisit, the payload digest, the Completion fields the schedule keeps."""

from __future__ import annotations

import dataclasses
import hashlib

from frontier_crawl.engine.core import _completion, _digest, _validators, _visit
from frontier_crawl.fetch import ErrorKind, FetchRequest, FetchResult
from frontier_crawl.frontier import LastCapture


def result(status: int, headers: tuple[tuple[str, str], ...] = (), raw: bytes = b"x" * 100,
           error: ErrorKind | None = None) -> FetchResult:  # fmt: skip
    return FetchResult(
        request=FetchRequest("http://h.test/a/p"), url="http://h.test/a/p", status=status,
        error=error, error_detail="", header_bytes=b"HTTP/1.1 200 OK\r\n\r\n",
        headers=tuple((k.lower(), v) for k, v in headers), raw_body=raw, body=raw,
        request_bytes=b"", ip="127.0.0.1", http_version="1.1", started_at=1_700_000_000.5,
        finished=5.0, duration_s=0.1,
    )  # fmt: skip


def test_a_revisit_asks_with_the_validators_it_has() -> None:
    both = LastCapture(etag='"v1"', last_modified="Wed, 01 May 2024 12:00:00 GMT")
    assert _validators(both) == (
        ("If-None-Match", '"v1"'),
        ("If-Modified-Since", "Wed, 01 May 2024 12:00:00 GMT"),
    )
    assert _validators(LastCapture(etag='W/"w"')) == (("If-None-Match", 'W/"w"'),)
    assert _validators(LastCapture(last_modified="x")) == (("If-Modified-Since", "x"),)
    assert _validators(LastCapture(digest=b"d" * 20)) == ()  # none: an ordinary GET


def test_digest_of_complete_2xx_payloads_only() -> None:
    assert _digest(result(200)) == hashlib.sha1(b"x" * 100).digest()
    assert _digest(result(206)) == hashlib.sha1(b"x" * 100).digest()
    assert _digest(result(304, raw=b"")) == b""
    assert _digest(result(404)) == b""
    assert _digest(result(200, error=ErrorKind.TRUNCATED)) == b""  # half a page is no capture


def test_visit_facts() -> None:
    ok = result(200, (("ETag", '"v2"'), ("Last-Modified", "Thu, 02 May 2024 00:00:00 GMT")))
    facts = _visit(_completion(ok), ok, _digest(ok), "<urn:uuid:1>")
    assert (facts.etag, facts.last_modified) == ('"v2"', "Thu, 02 May 2024 00:00:00 GMT")
    assert facts.digest == _digest(ok) and facts.record_id == "<urn:uuid:1>"
    assert facts.fetched_at == 1_700_000_000.5 and facts.location == ""
    assert (facts.status, facts.finished) == (200, 5.0)  # the rest as before
    moved = result(301, (("Location", "../q?x=1"),), raw=b"")
    assert _visit(_completion(moved), moved, b"", "").location == "http://h.test/q?x=1"
    bad = dataclasses.replace(moved, headers=(("location", "http://[::1"),))
    assert _visit(_completion(bad), bad, b"", "").location == ""
    # recrawl off: the facts are today's (none of the new fields filled)
    plain = _completion(ok)
    assert (plain.etag, plain.digest, plain.record_id, plain.fetched_at) == (None, b"", "", 0.0)
