"""The fetcher's socket-free parts: error mapping, bounded decoding, header parsing, pool.

(These need no network; they live here only because tests/net/test_fetch*.py is the fetch
subsystem's test location for now.)
"""

from __future__ import annotations

import dataclasses
import gzip
import zlib
from pathlib import Path

import pycurl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier_crawl.fetch import FetchRequest, FetchResult, NotModified, errors
from frontier_crawl.fetch.cache import HttpCache
from frontier_crawl.fetch.decode import DecodedTooLarge, DecodeError, decoder_for
from frontier_crawl.fetch.errors import Phase, map_curl_error
from frontier_crawl.fetch.pool import CurlOptions, HandlePool
from frontier_crawl.fetch.resolvemap import ResolveMap, resolve_map
from frontier_crawl.fetch.transfer import Transfer, parse_header_block
from frontier_crawl.fetch.types import ErrorKind

pytestmark = pytest.mark.timeout(10)

# -- map_curl_error -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (pycurl.E_COULDNT_RESOLVE_HOST, ErrorKind.DNS),
        (pycurl.E_COULDNT_CONNECT, ErrorKind.CONNECT),
        (pycurl.E_OPERATION_TIMEDOUT, ErrorKind.TIMEOUT),
        (pycurl.E_SSL_CONNECT_ERROR, ErrorKind.TLS),
        (pycurl.E_PEER_FAILED_VERIFICATION, ErrorKind.TLS),
        (pycurl.E_SSL_CACERT_BADFILE, ErrorKind.TLS),
        (pycurl.E_PARTIAL_FILE, ErrorKind.TRUNCATED),
        (pycurl.E_RECV_ERROR, ErrorKind.TRUNCATED),
        (pycurl.E_GOT_NOTHING, ErrorKind.TRUNCATED),
        (pycurl.E_FILESIZE_EXCEEDED, ErrorKind.TOO_LARGE),
        (pycurl.E_WRITE_ERROR, ErrorKind.OTHER),
        (pycurl.E_BAD_CONTENT_ENCODING, ErrorKind.PROTOCOL),
        (pycurl.E_HTTP2, ErrorKind.PROTOCOL),
        (8, ErrorKind.PROTOCOL),  # WEIRD_SERVER_REPLY
        (92, ErrorKind.TRUNCATED),  # HTTP2_STREAM: a stream reset (see test_url_standards.py)
        (pycurl.E_COULDNT_RESOLVE_PROXY, ErrorKind.PROXY),
        (97, ErrorKind.PROXY),  # CURLE_PROXY
        (100, ErrorKind.TOO_LARGE),  # CURLE_TOO_LARGE
        (pycurl.E_TOO_MANY_REDIRECTS, ErrorKind.REDIRECTS),
        (pycurl.E_URL_MALFORMAT, ErrorKind.OTHER),
        (9999, ErrorKind.OTHER),
    ],
)
def test_table(code: int, kind: ErrorKind) -> None:
    assert map_curl_error(code, "message") is kind


def test_every_code_maps_to_a_kind() -> None:
    for code in range(1, 102):
        assert isinstance(map_curl_error(code, ""), ErrorKind)


def test_write_error_is_too_large_only_when_we_aborted() -> None:
    aborted = Phase(aborted_too_large=True)
    assert map_curl_error(errors.CURLE_WRITE_ERROR, "", aborted) is ErrorKind.TOO_LARGE
    assert map_curl_error(errors.CURLE_WRITE_ERROR, "Failure writing output") is ErrorKind.OTHER


@pytest.mark.parametrize(
    ("phase", "message", "kind"),
    [
        (Phase(resolved=False, connected=False), "Operation timed out", ErrorKind.DNS),
        (Phase(resolved=True, connected=False), "Connection timed out", ErrorKind.CONNECT),
        (Phase(), "Operation timed out after 1000 ms", ErrorKind.TIMEOUT),
        (Phase(), "Operation too slow. Less than 100 bytes/sec", ErrorKind.TIMEOUT),
        (Phase(connected=False), "Resolving timed out after 2000 milliseconds", ErrorKind.DNS),
    ],
)
def test_timeout_by_phase(phase: Phase, message: str, kind: ErrorKind) -> None:
    assert map_curl_error(pycurl.E_OPERATION_TIMEDOUT, message, phase) is kind


def test_unsupported_protocol_vs_malformed_reply() -> None:
    code = pycurl.E_UNSUPPORTED_PROTOCOL
    assert map_curl_error(code, 'Protocol "file" disabled') is ErrorKind.FORBIDDEN_SCHEME
    assert map_curl_error(code, 'Protocol "gopher" not supported') is ErrorKind.FORBIDDEN_SCHEME
    assert map_curl_error(code, "Received HTTP/0.9 when not allowed") is ErrorKind.PROTOCOL
    assert map_curl_error(code, "Unsupported HTTP/1 subversion in response") is ErrorKind.PROTOCOL


def test_bad_chunking_is_protocol() -> None:
    message = "chunk hex-length char not a hex digit: 0x7a"
    assert map_curl_error(pycurl.E_RECV_ERROR, message) is ErrorKind.PROTOCOL
    assert map_curl_error(pycurl.E_RECV_ERROR, "Connection reset by peer") is ErrorKind.TRUNCATED


# -- decoding -------------------------------------------------------------------------------

TEXT = b"All work and no play makes Jack a dull boy.\n" * 500


def _decode(encoding: str, data: bytes, limit: int = 1 << 20, step: int = 7) -> bytes:
    decoder = decoder_for(encoding, limit)
    assert decoder is not None
    for start in range(0, len(data), step):
        decoder.feed(data[start : start + step])
    return decoder.finish()


def _raw_deflate(data: bytes) -> bytes:
    comp = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return comp.compress(data) + comp.flush()


@pytest.mark.parametrize("step", [1, 2, 7, 100_000])
def test_decode_gzip_zlib_and_raw_deflate(step: int) -> None:
    assert _decode("gzip", gzip.compress(TEXT), step=step) == TEXT
    assert _decode("x-gzip", gzip.compress(TEXT), step=step) == TEXT
    assert _decode("GZIP", zlib.compress(TEXT), step=step) == TEXT  # zlib under a gzip label
    assert _decode("deflate", zlib.compress(TEXT), step=step) == TEXT
    assert _decode("deflate", _raw_deflate(TEXT), step=step) == TEXT


@pytest.mark.parametrize("encoding", [None, "identity", "br", "zstd", "gzip, gzip", ""])
def test_no_decoder(encoding: str | None) -> None:
    assert decoder_for(encoding, 100) is None


def test_decoder_never_exceeds_limit_plus_one() -> None:
    bomb = gzip.compress(bytes(50 << 20))  # 50 MB of zeros, about 50 KB compressed
    decoder = decoder_for("gzip", 1000)
    assert decoder is not None
    with pytest.raises(DecodedTooLarge):
        for start in range(0, len(bomb), 16384):
            decoder.feed(bomb[start : start + 16384])
            assert decoder.size <= 1001
    assert decoder.size == 1001


def test_decoder_limit_is_inclusive() -> None:
    assert _decode("gzip", gzip.compress(TEXT), limit=len(TEXT)) == TEXT
    with pytest.raises(DecodedTooLarge):
        _decode("gzip", gzip.compress(TEXT), limit=len(TEXT) - 1)


def test_corrupt_and_truncated_streams() -> None:
    with pytest.raises(DecodeError):
        _decode("gzip", gzip.compress(TEXT)[:10] + b"garbage garbage garbage" * 5)
    with pytest.raises(DecodeError):
        _decode("gzip", gzip.compress(TEXT)[:-20])
    with pytest.raises(DecodeError):
        _decode("deflate", b"x")  # one byte: not even a header


def test_empty_encoded_body_is_empty() -> None:
    decoder = decoder_for("gzip", 10)
    assert decoder is not None
    with pytest.raises(DecodeError):  # gzip with zero bytes has no end marker
        decoder.finish()
    deflate = decoder_for("deflate", 10)
    assert deflate is not None
    assert deflate.finish() == b""


def test_trailing_garbage_after_the_stream_is_ignored() -> None:
    assert _decode("gzip", gzip.compress(TEXT) + b"\0\0junk") == TEXT


# -- header parsing ---------------------------------------------------------------------------


def test_parse_header_block() -> None:
    lines = [
        b"HTTP/1.1 200 OK\r\n",
        b"Content-Type:  text/html \r\n",
        b"X-Folded: one\r\n",
        b"  two\r\n",
        b"Set-Cookie: a=1\r\n",
        b"SET-COOKIE: b=2\r\n",
        b"X-Latin: caf\xe9\r\n",
        b"garbage line\r\n",
        b"\r\n",
    ]
    assert parse_header_block(lines) == (
        ("content-type", "text/html"),
        ("x-folded", "one two"),
        ("set-cookie", "a=1"),
        ("set-cookie", "b=2"),
        ("x-latin", "café"),
    )
    assert parse_header_block([]) == ()


def _transfer_headers(*lines: bytes) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """(header block, parsed headers) of a transfer that was handed ``lines`` by libcurl."""
    transfer = Transfer(FetchRequest("http://h.test/"), 1000)
    transfer.header_lines.extend(lines)  # what the handle's HEADERFUNCTION does
    return transfer.block(), transfer._headers()


@pytest.mark.parametrize("eol", [b"\r\n", b"\n"])
def test_the_header_block_is_the_last_response_s_to_its_blank_line(eol: bytes) -> None:
    # a 100 Continue (or a proxy's CONNECT reply) before the response, trailers after it
    block, headers = _transfer_headers(
        b"HTTP/1.1 100 Continue" + eol, eol,
        b"HTTP/1.1 200 OK" + eol, b"Content-Type: text/html" + eol, b"X-A: 1" + eol, eol,
        b"X-Sum: 42" + eol, eol,
    )  # fmt: skip
    assert block == b"HTTP/1.1 200 OK" + eol + b"Content-Type: text/html" + eol + b"X-A: 1" + (
        eol + eol
    )
    assert headers == (("content-type", "text/html"), ("x-a", "1"))


def test_the_header_block_of_a_transfer_cut_short_or_without_headers() -> None:
    assert _transfer_headers() == (b"", ())
    assert _transfer_headers(b"HTTP/1.1 200 OK\r\n", b"X-A: 1\r\n") == (
        b"HTTP/1.1 200 OK\r\nX-A: 1\r\n",
        (("x-a", "1"),),
    )
    # a blank line ends the block even when its line before ends in CRLF and it in LF
    assert _transfer_headers(b"HTTP/1.1 204 No\r\n", b"\n", b"X-T: 1\r\n")[0] == (
        b"HTTP/1.1 204 No\r\n\n"
    )


def test_the_header_block_is_cut_again_when_lines_come_after_the_body_started() -> None:
    transfer = Transfer(FetchRequest("http://h.test/"), 1000)
    transfer.header_lines.extend([b"HTTP/1.1 200 OK\r\n", b"X-A: 1\r\n", b"\r\n"])
    assert transfer._headers() == (("x-a", "1"),)
    transfer.header_lines.extend([b"HTTP/1.1 200 OK\r\n", b"X-B: 2\r\n", b"\r\n"])
    assert transfer._headers() == (("x-b", "2"),)


_HEADER_TEXT = st.lists(
    st.text(alphabet=st.sampled_from("aB:- \t\r\x0b\x1c\x85\xa0\xe9"), max_size=12), max_size=8
)


def _old_block(lines: list[bytes]) -> list[bytes]:
    """The block as the per-line header callback used to keep it: a status line starts it,
    its blank line ends it."""
    block: list[bytes] = []
    done = False
    for line in lines:
        if line.startswith(b"HTTP/"):
            block, done = [line], False
        elif not done and block:
            block.append(line)
            done = line in (b"\r\n", b"\n")
    return block


@given(lines=_HEADER_TEXT, eol=st.sampled_from(["\r\n", "\n"]))
def test_a_cut_block_is_the_block_the_line_callback_kept(lines: list[str], eol: str) -> None:
    # libcurl's lines (each ending in LF) of a 100 Continue, a response and trailers
    text = eol.join(
        ["HTTP/1.1 100 Continue", "", "HTTP/1.1 200 OK: x", *(x.replace("\n", "") for x in lines)]
    )
    lines_in = [line + b"\n" for line in (text + eol).encode("iso-8859-1").split(b"\n")[:-1]]
    transfer = Transfer(FetchRequest("http://h.test/"), 1000)
    transfer.header_lines.extend(lines_in)
    old = _old_block(lines_in)
    assert transfer.block() == b"".join(old)
    assert transfer._headers() == parse_header_block(old)


# -- pool ---------------------------------------------------------------------------------------


def test_pool_is_lazy_bounded_and_reuses_handles() -> None:
    configured: list[pycurl.Curl] = []
    pool = HandlePool(2, configured.append)
    try:
        assert (pool.created, pool.available) == (0, 2)
        first = pool.acquire()
        assert (pool.created, pool.available) == (1, 1)
        second = pool.acquire()
        with pytest.raises(RuntimeError):
            pool.acquire()
        pool.release(first)
        assert pool.available == 1
        assert pool.acquire() is first  # LIFO reuse, no new handle
        assert pool.created == 2
        assert configured == [first, second, first]  # configured at creation and after reset
        pool.release(second)
    finally:
        pool.close()


def test_curl_options_apply_to_a_handle() -> None:
    options = CurlOptions(
        user_agent="x/1",
        proxy="http://127.0.0.1:3128",
        verify_tls=False,
        ca_bundle="/dev/null",
        maxconnects=10,
        http2=False,
    )
    handle = pycurl.Curl()
    try:
        options.apply(handle)
        handle.reset()
        options.apply(handle)  # re-applicable after reset
    finally:
        handle.close()
    pairs = dict(options._pairs)  # what apply sets on each new or released handle
    assert pairs[pycurl.USERAGENT] == "x/1"
    assert pairs[pycurl.PROXY] == "http://127.0.0.1:3128"
    assert pairs[pycurl.SSL_VERIFYPEER] == 0
    assert pairs[pycurl.CAINFO] == "/dev/null"
    assert pairs[pycurl.MAXCONNECTS] == 10
    assert pairs[pycurl.HTTP_VERSION] == pycurl.CURL_HTTP_VERSION_1_1
    assert pycurl.RESOLVE not in pairs  # each transfer carries its own (resolvemap.py)
    changed = dataclasses.replace(options, user_agent="y/2", timeout_s=5.0)
    assert dict(changed._pairs)[pycurl.USERAGENT] == "y/2"  # computed again on replace
    assert dict(changed._pairs)[pycurl.TIMEOUT_MS] == 5000


# -- issue 4: proxy tunnel refusal, the HTTP cache ------------------------------------------


def test_refused_proxy_tunnel_is_proxy() -> None:
    message = "CONNECT tunnel failed, response 502"
    assert map_curl_error(pycurl.E_COULDNT_CONNECT, message) is ErrorKind.PROXY
    assert map_curl_error(pycurl.E_COULDNT_CONNECT, "Failed to connect") is ErrorKind.CONNECT


def _result(
    status: int,
    headers: tuple[tuple[str, str], ...],
    raw: bytes = b"",
    body: bytes | None = None,
) -> FetchResult:
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return FetchResult(
        request=FetchRequest("http://h.test/p"),
        url="http://h.test/p",
        status=status,
        error=None,
        error_detail="",
        header_bytes=head.encode(),
        headers=tuple((k.lower(), v) for k, v in headers),
        raw_body=raw,
        body=raw if body is None else body,
        request_bytes=b"GET /p HTTP/1.1\r\n\r\n",
        ip="127.0.0.1",
        http_version="1.1",
        started_at=1_700_000_000.5,
        finished=0.0,
        duration_s=0.0,
    )


def test_cache_stores_only_200s_with_a_validator(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path, 1 << 20)
    try:
        etag = (("ETag", '"v1"'),)
        assert not cache.store(_result(200, ()))  # no validator
        assert not cache.store(_result(404, etag))
        assert not cache.store(_result(200, (*etag, ("Cache-Control", "max-age=0, no-store"))))
        assert cache.lookup("http://h.test/p") is None
        assert cache.store(_result(200, (*etag, ("Last-Modified", "Wed, 01 May 2024"))))
        stored = cache.lookup("http://h.test/p")
        assert stored is not None and stored.fetched_at == 1_700_000_000.5
        assert stored.conditional_headers() == (
            ("If-None-Match", '"v1"'),
            ("If-Modified-Since", "Wed, 01 May 2024"),
        )
    finally:
        cache.close()


def test_cache_turns_a_304_into_the_stored_response(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path, 1 << 20)
    try:
        page = b"<html>" + b"p" * 500 + b"</html>"
        stored_headers = (("Content-Type", "text/html"), ("Content-Encoding", "gzip"),
                          ("ETag", '"v1"'), ("X-Old", "1"))  # fmt: skip
        cache.store(_result(200, stored_headers, gzip.compress(page), page))
        stored = cache.lookup("http://h.test/p")
        assert stored is not None
        answer = _result(304, (("ETag", '"v1"'), ("X-Old", "2"), ("Content-Length", "0")))
        result = cache.revalidated(answer, stored, 1 << 20)
        assert result.status == 304 and result.error is None
        assert result.body == page and result.raw_body == stored.raw_body
        assert result.content_type == "text/html"
        assert result.header("x-old") == "2"  # updated by the 304
        assert result.header("content-length") is None  # the 304's own framing is not kept
        assert result.header_bytes == answer.header_bytes  # the 304 as received
        assert result.not_modified == NotModified("http://h.test/p", 1_700_000_000.5)
        too_small = cache.revalidated(answer, stored, 100)  # the cap shrank since
        assert too_small.error is ErrorKind.TOO_LARGE and too_small.not_modified is None
    finally:
        cache.close()


# -- issue 29: fetch.resolve entries per transfer ---------------------------------------------


def test_resolve_map_gives_a_transfer_its_own_entry_only() -> None:
    entries = ("Alpha.test:80:127.0.0.1", "alpha.test:443:127.0.0.2", "*:8080:127.0.0.3",
               "+beta.test:80:127.0.0.4,127.0.0.5", "proxy.test:3128:127.0.0.9")  # fmt: skip
    aging = ResolveMap(entries, permanent=False, proxy=None)
    assert len(aging) == 5
    assert aging.entries_for("http://alpha.TEST/x?y#z") == ["+Alpha.test:80:127.0.0.1"]
    assert aging.entries_for("https://user@alpha.test/") == ["+alpha.test:443:127.0.0.2"]
    assert aging.entries_for("http://gamma.test:8080/") == ["+*:8080:127.0.0.3"]  # wildcard
    assert aging.entries_for("http://beta.test/") == ["+beta.test:80:127.0.0.4,127.0.0.5"]
    assert aging.entries_for("http://gamma.test/") == []
    assert aging.entries_for("http://[::1]:80/") == []
    assert aging.entries_for("http://alpha.test:99999/") == []  # a bad port: no entry, no error
    assert aging.entries_for("not a url") == []
    permanent = ResolveMap(entries, permanent=True, proxy="http://proxy.test:3128")
    assert permanent.entries_for("http://alpha.test/") == [
        "proxy.test:3128:127.0.0.9", "Alpha.test:80:127.0.0.1",
    ]  # fmt: skip
    assert permanent.entries_for("http://beta.test/")[1] == "+beta.test:80:127.0.0.4,127.0.0.5"
    assert permanent.entries_for("http://gamma.test/") == ["proxy.test:3128:127.0.0.9"]
    permanent.set_permanent(False)
    assert permanent.entries_for("http://alpha.test/")[1] == "+Alpha.test:80:127.0.0.1"
    assert resolve_map((), permanent=False, proxy=None).entries_for("http://alpha.test/") == []


# -- issue 29: the DNS cache's size -----------------------------------------------------------


def test_dns_lifetime_keeps_the_cache_near_its_bound() -> None:
    """The pruning transfer's lifetime: the TTL while the new names within it stay under
    ``DNS_CACHE_NAMES``; shorter when more come, never under a second, and never under the
    transfer timeout while ``fetch.resolve`` entries age (a loaded one must reach its
    lookup). The netns test (tests/net/test_dns.py) shows libcurl dropping the names."""
    from frontier_crawl.fetch import Fetcher, fetcher

    plain = Fetcher(dns_cache_ttl_s=120, timeout_s=5.0)
    aging = Fetcher(dns_cache_ttl_s=120, timeout_s=5.0, resolve=("a.test:80:127.0.0.1",))
    permanent = Fetcher(dns_cache_ttl_s=3, timeout_s=5.0, resolve=("a.test:80:127.0.0.1",))
    assert aging._resolve.aging and not permanent._resolve.aging and not plain._resolve.aging
    try:
        for client, many in ((plain, 1), (aging, 6), (permanent, 1)):
            client._counted_at = 100.0  # (the last prune's time)
            client._lookups = 1  # a name in 10 s: the TTL holds
            assert client._dns_lifetime(110.0) == client._options.dns_cache_ttl_s
            client._lookups = fetcher.DNS_CACHE_NAMES // 30 * 10  # 10 s at the bound's rate
            assert client._dns_lifetime(120.0) == min(30, client._options.dns_cache_ttl_s)
            assert client._lookups == 0  # counted again from this prune
            client._lookups = 100_000
            assert client._dns_lifetime(121.0) == min(many, client._options.dns_cache_ttl_s)
    finally:
        for client in (plain, aging, permanent):
            client.close()
