"""The sitemap parser (parse/sitemap.py) on real gzip data, files past 1 MiB, and hostile
input: entity expansion, external entities, DOCTYPE tricks, bombs, non-UTF-8, garbage."""

from __future__ import annotations

import gzip
import os
import time
import tomllib
import zlib
from pathlib import Path

import pytest

from frontier_crawl.config import ConfigError, CrawlSettings
from frontier_crawl.config import parse as parse_raw
from frontier_crawl.parse.sitemap import (
    CHUNK,
    MAX_MARKUP,
    SITEMAP_CALLBACK,
    Kind,
    Problem,
    SitemapLimits,
    level_meta,
    meta_level,
    parse_sitemap,
    w3c_datetime,
)

NS = b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
MIB = 1024 * 1024


def urlset(locs: list[bytes], lastmod: bytes = b"") -> bytes:
    mod = b"<lastmod>" + lastmod + b"</lastmod>" if lastmod else b""
    body = b"".join(b"<url><loc>" + loc + b"</loc>" + mod + b"</url>\n" for loc in locs)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n<urlset ' + NS + b">\n" + body + b"</urlset>"


def big_urlset(n: int, pad: int = 0) -> bytes:
    """A urlset of n pages (each padded with a long changefreq-like element, to pass 1 MiB)."""
    filler = b"<priority>0.5</priority><changefreq>" + b"x" * pad + b"</changefreq>"
    entries = b"".join(
        b"<url><loc>https://a.test/p%d</loc><lastmod>2024-03-01</lastmod>%s</url>" % (i, filler)
        for i in range(n)
    )
    return b"<urlset " + NS + b">" + entries + b"</urlset>"


# ----------------------------------------------------------------------------- lastmod


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024", 1704067200.0),
        ("2024-03", 1709251200.0),
        ("2024-03-01", 1709251200.0),
        ("2024-03-01T10:30Z", 1709289000.0),
        ("2024-03-01T10:30:15Z", 1709289015.0),
        ("2024-03-01T10:30:15.25Z", 1709289015.25),
        ("2024-03-01T11:30:15+01:00", 1709289015.0),
        ("2024-03-01T05:30:15-05:00", 1709289015.0),
        ("2024-03-01T10:30:15", 1709289015.0),  # no zone: UTC
        (" 2024-03-01 ", 1709251200.0),
    ],
)
def test_w3c_datetimes(text: str, expected: float) -> None:
    assert w3c_datetime(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "yesterday", "2024-13-01", "2024-02-30", "2024-03-01T25:00Z", "01/03/2024",
     "2024-03-01T10:30:15+25:00", "2024-3-1", "9" * 40, "2024-03-01T10:30:15Zjunk",
     "0000-01-01", "0000", "0000-12", "0000-01-01T00:00Z", "0000-01-01T00:00:00+01:00"],
)  # fmt: skip
def test_bad_dates_are_none(text: str) -> None:
    assert w3c_datetime(text) is None


def test_bad_lastmod_is_ignored_not_the_entry() -> None:
    got = parse_sitemap(urlset([b"https://a.test/x"], b"not a date"))
    assert got.problem is None
    assert got.entries == [("https://a.test/x", None)]


def test_year_zero_lastmod_is_ignored_not_raised() -> None:
    """Issue 34 point 1: year 0 raised ValueError out of the parser (calendar.timegm)."""
    got = parse_sitemap(urlset([b"https://a.test/x"], b"0000-01-01"))
    assert got.problem is None and got.entries == [("https://a.test/x", None)]


# ----------------------------------------------------------------------------- good files


def test_urlset_with_lastmod() -> None:
    got = parse_sitemap(urlset([b"https://a.test/1", b" https://a.test/2 "], b"2024-03-01"))
    assert got.kind is Kind.URLSET and got.problem is None
    assert [e.loc for e in got.entries] == ["https://a.test/1", "https://a.test/2"]
    assert {e.lastmod for e in got.entries} == {1709251200.0}


def test_sitemapindex() -> None:
    body = (
        b"<sitemapindex " + NS + b"><sitemap><loc>https://a.test/s1.xml.gz</loc>"
        b"<lastmod>2024-03-01T10:30Z</lastmod></sitemap>"
        b"<sitemap><loc>https://a.test/s2.xml</loc></sitemap></sitemapindex>"
    )
    got = parse_sitemap(body)
    assert got.kind is Kind.INDEX and got.problem is None
    assert got.entries == [
        ("https://a.test/s1.xml.gz", 1709289000.0),
        ("https://a.test/s2.xml", None),
    ]


def test_no_namespace_and_escaped_urls_and_non_http_locs() -> None:
    body = (
        b"<urlset><url><loc>https://a.test/?a=1&amp;b=2</loc></url>"
        b"<url><loc>ftp://a.test/f</loc></url><url><loc>/relative</loc></url>"
        b"<url><nothing/></url><other><loc>https://a.test/not-an-entry</loc></other></urlset>"
    )
    got = parse_sitemap(body)
    assert got.problem is None
    assert got.entries == [("https://a.test/?a=1&b=2", None)]


def test_declared_latin1_encoding_is_read() -> None:
    body = '<?xml version="1.0" encoding="ISO-8859-1"?><urlset><url><loc>https://a.test/é</loc>'
    got = parse_sitemap((body + "</url></urlset>").encode("latin-1"))
    assert got.problem is None and got.entries == [("https://a.test/é", None)]


def test_gzip_by_magic_not_by_name_past_one_mib() -> None:
    plain = big_urlset(20_000, pad=40)
    assert len(plain) > 2 * MIB
    packed = gzip.compress(plain)
    got = parse_sitemap(packed)
    assert got.kind is Kind.URLSET and got.problem is None
    assert len(got.entries) == 20_000 and got.read_bytes == len(plain)
    assert got.entries[-1] == ("https://a.test/p19999", 1709251200.0)
    assert parse_sitemap(plain).entries == got.entries  # the same file, uncompressed


def test_concatenated_gzip_members() -> None:
    a, b = big_urlset(2), b""
    half = len(a) // 2
    b = gzip.compress(a[:half]) + gzip.compress(a[half:])
    assert parse_sitemap(b).entries == parse_sitemap(a).entries


def test_many_empty_gzip_members_stop_at_once() -> None:
    """200,000 empty gzip members (4 MB): one decompressor each, and the rest of the body
    copied after each, took 131 s before the member cap; now a clear bad-gzip at once."""
    body = gzip.compress(b"") * 200_000
    t0 = time.perf_counter()
    assert parse_sitemap(body).problem is Problem.BAD_GZIP
    assert time.perf_counter() - t0 < 2


def test_large_incompressible_gzip_is_linear() -> None:
    """30 MB of gzip that barely compresses: input handed to zlib in pieces, never copied
    whole per step."""
    body = gzip.compress(b"<urlset>" + os.urandom(15 * MIB).hex().encode(), 1)
    assert len(body) > 15 * MIB
    t0 = time.perf_counter()
    got = parse_sitemap(body)
    assert got.problem is Problem.BAD_XML  # one text node past libxml2's 10 MB limit
    assert got.read_bytes > 10 * MIB
    assert time.perf_counter() - t0 < 10


def test_text_sitemap() -> None:
    body = b"\xef\xbb\xbfhttps://a.test/1\r\n\n  http://a.test/2  \nnot a url\n"
    body += b"https://a.test/ with space\n"
    got = parse_sitemap(body)
    assert got.kind is Kind.TEXT and got.problem is None
    assert [e.loc for e in got.entries] == ["https://a.test/1", "http://a.test/2"]
    off = parse_sitemap(body, SitemapLimits(text=False))
    assert off.kind is None and off.problem is Problem.NOT_A_SITEMAP and not off.entries


def test_text_sitemap_gzip_over_one_mib_across_chunks() -> None:
    lines = b"".join(b"https://a.test/page-number-%07d\n" % i for i in range(60_000))
    assert len(lines) > 2 * MIB and len(lines) > 4 * CHUNK
    got = parse_sitemap(gzip.compress(lines), SitemapLimits(max_urls=100_000))
    assert got.kind is Kind.TEXT and got.problem is None and len(got.entries) == 60_000
    assert got.entries[12_345].loc == "https://a.test/page-number-0012345"


# ----------------------------------------------------------------------------- limits


def test_max_urls_keeps_the_first_ones() -> None:
    got = parse_sitemap(big_urlset(120), SitemapLimits(max_urls=100))
    assert got.problem is Problem.TOO_MANY_URLS and len(got.entries) == 100
    assert got.entries[-1].loc == "https://a.test/p99"
    exact = parse_sitemap(big_urlset(100), SitemapLimits(max_urls=100))
    assert exact.problem is None and len(exact.entries) == 100


def test_entries_without_loc_count_toward_max_urls() -> None:
    body = b"<urlset>" + b"<url/>" * 1_000_000 + b"</urlset>"
    t0 = time.perf_counter()
    got = parse_sitemap(gzip.compress(body), SitemapLimits(max_urls=1000))
    assert got.problem is Problem.TOO_MANY_URLS and not got.entries
    assert got.read_bytes < 2 * CHUNK  # stopped at the 1001st, not read to the end
    assert time.perf_counter() - t0 < 5


def test_gzip_bomb_stops_at_max_bytes() -> None:
    """~100 KiB that expand to 200 MiB of valid XML: expanded up to max_bytes, no further."""
    bomb = gzip.compress(b"<urlset>" + b" " * (200 * MIB), 9)
    assert len(bomb) < 300 * 1024
    limits = SitemapLimits(max_bytes=8 * MIB)
    t0 = time.perf_counter()
    got = parse_sitemap(bomb, limits)
    assert got.problem is Problem.TOO_LARGE
    assert limits.max_bytes < got.read_bytes <= limits.max_bytes + CHUNK
    assert time.perf_counter() - t0 < 10


def test_default_max_bytes_bomb_with_valid_entries_first() -> None:
    """The protocol's 50 MiB: the entries before the cut are kept."""
    bomb = gzip.compress(
        urlset([b"https://a.test/first"])[: -len(b"</urlset>")] + b"\n" * (80 * MIB)
    )
    got = parse_sitemap(bomb)
    assert got.problem is Problem.TOO_LARGE and got.entries == [("https://a.test/first", None)]
    assert got.read_bytes == 50 * MIB + 1


def test_zeros_bomb_stops_at_once() -> None:
    got = parse_sitemap(gzip.compress(b"<urlset>" + bytes(100 * MIB)))
    assert got.problem is Problem.BAD_XML and got.read_bytes <= CHUNK


def test_many_tiny_elements_are_bounded() -> None:
    body = b"<urlset><url><loc>https://a.test/a</loc></url>" + b"<x/>" * 5_000_000 + b"</urlset>"
    t0 = time.perf_counter()
    got = parse_sitemap(gzip.compress(body), SitemapLimits(max_urls=1000))
    assert got.problem is Problem.TOO_LARGE and got.entries == [("https://a.test/a", None)]
    assert got.read_bytes < MIB
    assert time.perf_counter() - t0 < 5


def test_huge_loc_is_skipped_not_held() -> None:
    body = b"<urlset><url><loc>https://a.test/" + b"a" * (3 * MIB) + b"</loc></url>"
    body += b"<url><loc>https://a.test/ok</loc></url></urlset>"
    got = parse_sitemap(body)
    assert got.problem is None and got.entries == [("https://a.test/ok", None)]


def comments_of_lt(size: int) -> bytes:
    """A well-formed urlset of ``size`` bytes of comments full of ``<`` (each just under
    MAX_MARKUP long, so none is refused) and one entry after them."""
    comment = b"<!--" + b"<" * (MAX_MARKUP - 16) + b"-->"
    head = b"<urlset " + NS + b">"
    tail = b"<url><loc>https://a.test/after</loc></url></urlset>"
    return head + comment * max(1, size // len(comment)) + tail


def test_long_markup_guard_is_linear() -> None:
    """Issue 34 point 2: the guard's ``<[^>]{MAX_MARKUP}`` scanned on from every ``<``: 1 MiB
    of comments full of ``<`` cost seconds of CPU (4 MiB froze the crawl loop). Now 16 times
    the input costs about 16 times the time (a generous bound: 48 times, and a floor for the
    small input's timer noise)."""
    small, large = comments_of_lt(64 * 1024), comments_of_lt(MIB)
    times = []
    for body in (small, large):
        t0 = time.process_time()
        got = parse_sitemap(body)
        times.append(time.process_time() - t0)
        assert got.problem is None and got.entries == [("https://a.test/after", None)]
    assert times[1] < 48 * max(times[0], 0.005), times


def test_long_markup_is_still_refused() -> None:
    """What the guard refuses is unchanged: a tag of MAX_MARKUP bytes without ``>`` (found
    across chunks, after ``<`` runs that stay short), the entries before it kept."""
    entry = b"<url><loc>https://a.test/before</loc></url>"
    short = b"<!--" + b"<" * 1000 + b"-->"
    def tag(size: int) -> bytes:  # an element of ``size`` bytes of distinct attributes
        attrs = b"".join(b' a%06d="x"' % i for i in range(size // 12))
        return b"<url" + attrs + b"/>"

    long_tag = tag(MAX_MARKUP + 100)
    body = b"<urlset " + NS + b">" + entry + short * 300 + long_tag + b"</urlset>"
    got = parse_sitemap(body)
    assert got.problem is Problem.TOO_LARGE and got.entries == [("https://a.test/before", None)]
    fits = tag(MAX_MARKUP - 100)
    ok = parse_sitemap(b"<urlset " + NS + b">" + short * 300 + fits + entry + b"</urlset>")
    assert ok.problem is None and ok.entries == [("https://a.test/before", None)]


def test_text_without_line_breaks_is_linear() -> None:
    body = b"https://a.test/" + b"a" * (40 * MIB)
    t0 = time.perf_counter()
    got = parse_sitemap(body)
    assert got.problem is Problem.NOT_A_SITEMAP and not got.entries
    assert time.perf_counter() - t0 < 10


def test_text_of_blank_and_garbage_lines_is_cheap() -> None:
    """40 MB of blank lines took 52 s when each line cost Python; now they are skipped by
    bytes.find. Lines with "://" that are no URL stop the reading after max_urls."""
    t0 = time.perf_counter()
    got = parse_sitemap(b"x\n" + b"\n" * (40 * MIB))
    assert got.problem is Problem.NOT_A_SITEMAP
    garbage = parse_sitemap(b"https://a.test/ok\n" + b"see http://x here\n" * MIB)
    assert garbage.problem is Problem.TOO_LARGE and garbage.entries == [("https://a.test/ok", None)]
    assert garbage.read_bytes < 2 * MIB  # stopped after 50,000 of them
    assert time.perf_counter() - t0 < 10


def test_tag_of_millions_of_attributes_is_refused_before_libxml2() -> None:
    """2,000,000 empty attributes (23 MB) cost libxml2 ~7 s and ~500 MB; refused at once."""
    attrs = b"".join(b' a%d=""' % i for i in range(2_000_000))
    t0 = time.perf_counter()
    got = parse_sitemap(b"<urlset" + attrs + b"><url><loc>https://a.test/</loc></url></urlset>")
    assert got.problem is Problem.TOO_LARGE and not got.entries
    assert time.perf_counter() - t0 < 2
    comment = b"<urlset><url><loc>https://a.test/</loc></url><!--" + b"x" * MIB + b"-->"
    late = parse_sitemap(comment + b"</urlset>")  # across chunks too
    assert late.problem is Problem.TOO_LARGE and late.entries == [("https://a.test/", None)]


def test_truncated_by_the_fetcher() -> None:
    body = big_urlset(10)
    got = parse_sitemap(body[: len(body) // 2], truncated=True)
    assert got.problem is Problem.TOO_LARGE and 0 < len(got.entries) < 10


# ----------------------------------------------------------------------------- hostile


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset><url><loc>https://a.test/&lol9;</loc></url></urlset>"""


def test_billion_laughs_is_refused_unexpanded() -> None:
    t0 = time.perf_counter()
    got = parse_sitemap(BILLION_LAUGHS)
    assert got.problem is Problem.DTD and got.kind is None and not got.entries
    assert time.perf_counter() - t0 < 2
    assert parse_sitemap(gzip.compress(BILLION_LAUGHS)).problem is Problem.DTD


def test_external_entity_never_reads_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    os.chmod(secret, 0o600)
    for decl in (
        f'<!ENTITY xxe SYSTEM "file://{secret}">'.encode(),
        f'<!ENTITY % p SYSTEM "file://{secret}"> %p;'.encode(),
        b'<!ENTITY xxe SYSTEM "http://127.0.0.1:9/x">',
    ):
        body = b'<?xml version="1.0"?><!DOCTYPE urlset [' + decl + b"]>"
        body += b"<urlset><url><loc>https://a.test/&xxe;</loc></url></urlset>"
        atime = secret.stat().st_atime_ns
        got = parse_sitemap(body)
        assert got.problem is Problem.DTD and not got.entries, decl
        assert all("TOPSECRET" not in e.loc for e in got.entries)
        assert secret.stat().st_atime_ns == atime


def test_external_dtd_and_bare_doctype_are_refused(tmp_path: Path) -> None:
    dtd = tmp_path / "x.dtd"
    dtd.write_text('<!ENTITY leak "LEAKED">')
    for body in (
        f'<!DOCTYPE urlset SYSTEM "file://{dtd}"><urlset><url><loc>https://a.test/&leak;</loc>'
        f"</url></urlset>".encode(),
        b"<!DOCTYPE urlset><urlset><url><loc>https://a.test/</loc></url></urlset>",
        b"<!doctype urlset><urlset/>",
    ):
        got = parse_sitemap(body)
        assert got.problem is Problem.DTD and not got.entries


def test_doctype_after_many_comments_is_still_a_dtd() -> None:
    comments = b"<!-- padding -->\n" * 40_000  # past the first chunk
    assert len(comments) > 2 * CHUNK
    body = comments + BILLION_LAUGHS.split(b"?>", 1)[1]
    got = parse_sitemap(body)
    assert got.problem is Problem.DTD and not got.entries


def test_non_utf8_garbage_and_other_documents() -> None:
    cases = {
        b"<urlset><url><loc>https://a.test/\xe9\xff</loc></url></urlset>": Problem.BAD_XML,
        b"<<<>>>": Problem.BAD_XML,
        b"<html><body><url><loc>https://a.test/</loc></url></body></html>": Problem.NOT_A_SITEMAP,
        b"": Problem.NOT_A_SITEMAP,
        b"   \n\t ": Problem.NOT_A_SITEMAP,
        b"\x00\x01\x02binary": Problem.NOT_A_SITEMAP,
        "<urlset/>".encode("utf-16"): Problem.NOT_A_SITEMAP,  # the protocol says UTF-8
        b"\x1f\x8bnot really gzip": Problem.BAD_GZIP,
        gzip.compress(big_urlset(50))[:-100]: Problem.BAD_GZIP,  # truncated stream
    }
    for body, problem in cases.items():
        got = parse_sitemap(body)
        assert got.problem is problem, body[:40]


def test_entries_before_an_error_are_kept() -> None:
    body = b"<urlset><url><loc>https://a.test/1</loc></url><url><loc>https://a.test/&b</loc>"
    got = parse_sitemap(body + b"</url></urlset>")
    assert got.problem is Problem.BAD_XML and got.entries == [("https://a.test/1", None)]
    packed = gzip.compress(big_urlset(5000))
    truncated = parse_sitemap(packed[: len(packed) // 2])
    assert truncated.problem is Problem.BAD_GZIP and 0 < len(truncated.entries) < 5000


def test_random_bytes_never_raise() -> None:
    rng = __import__("random").Random(22)
    seeds = [big_urlset(3), BILLION_LAUGHS, gzip.compress(big_urlset(3)), b"https://a.test/\n"]
    for _ in range(400):
        body = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            body[rng.randrange(len(body))] = rng.randrange(256)
        got = parse_sitemap(bytes(body), SitemapLimits(max_bytes=4096, max_urls=10))
        assert got.problem is None or isinstance(got.problem, Problem)
        assert len(got.entries) <= 10


def test_deeply_nested_elements() -> None:
    body = b"<urlset><url>" + b"<a>" * 100_000 + b"<loc>https://a.test/deep</loc>"
    body += b"</a>" * 100_000 + b"</url></urlset>"
    t0 = time.perf_counter()
    got = parse_sitemap(body)  # no tree is built: depth costs nothing; only direct children
    assert got.kind is Kind.URLSET and got.problem is None and not got.entries  # count
    assert time.perf_counter() - t0 < 5
    budget = parse_sitemap(body, SitemapLimits(max_urls=100))  # 1,600 elements at most
    assert budget.problem is Problem.TOO_LARGE


def test_raw_deflate_is_not_gzip() -> None:
    assert parse_sitemap(zlib.compress(big_urlset(2))).problem is Problem.NOT_A_SITEMAP


# ----------------------------------------------------------------------------- seams


def parse(text: str) -> CrawlSettings:
    return parse_raw(tomllib.loads('[crawl]\nseeds = ["https://a.test/"]\n' + text))


def test_callback_and_levels() -> None:
    assert SITEMAP_CALLBACK == "\x00sitemap"
    assert level_meta(0) == b"" and meta_level(b"") == 0
    assert [meta_level(level_meta(n)) for n in (1, 2, 16)] == [1, 2, 16]


def test_settings_section(tmp_path: Path) -> None:
    s = parse("")
    assert s.sitemaps.enabled is False and s.sitemaps.robots is True
    assert s.sitemaps.paths == ("/sitemap.xml",)
    assert (s.sitemaps.max_bytes, s.sitemaps.max_urls, s.sitemaps.max_index_depth) == (
        50 * MIB, 50_000, 2)  # fmt: skip
    limits = SitemapLimits.from_settings(parse("[sitemaps]\nmax_bytes = 4096\ntext = false\n"))
    assert limits == SitemapLimits(max_bytes=4096, max_urls=50_000, text=False)
    for text, key in (
        ('[sitemaps]\npaths = ["sitemap.xml"]\n', "sitemaps.paths[0]"),
        ('[sitemaps]\npaths = ["//other.test/x"]\n', "sitemaps.paths[0]"),
        ('[sitemaps]\npaths = ["/ok", "/a b"]\n', "sitemaps.paths[1]"),
        ("[sitemaps]\nmax_bytes = 10\n", "sitemaps.max_bytes"),
        ("[sitemaps]\nmax_urls = 0\n", "sitemaps.max_urls"),
        ("[sitemaps]\nmax_index_depth = -1\n", "sitemaps.max_index_depth"),
        ("[sitemaps]\nenable = true\n", "sitemaps"),
    ):
        pattern = key.replace(".", "(\\.|: )", 1).replace("[", r"\[").replace("]", r"\]")
        with pytest.raises(ConfigError, match=pattern):
            parse(text)
