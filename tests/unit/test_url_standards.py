"""Issue 10, points 8-12 and "also seen": URLs as browsers resolve them (WHATWG URL Standard),
scope entries that can match, and two fetch details. Each test is named after its point."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from frontier_crawl.cli import main
from frontier_crawl.config import ConfigError, parse
from frontier_crawl.fetch.decode import decoder_for
from frontier_crawl.fetch.errors import CURLE_HTTP2_STREAM, map_curl_error
from frontier_crawl.frontier import Frontier
from frontier_crawl.frontier.scope import check_scope
from frontier_crawl.frontier.urls import canonicalize
from frontier_crawl.parse import extract_links
from frontier_crawl.parse.resolve import Base, resolve
from tests.conftest import render_toml

PAGE = "http://h.test/a/b/c.html"
PRIVET = "\u043f\u0440\u0438\u0432\u0435\u0442"  # "привет"


def _admitted(page: str, body: bytes, content_type: str | None) -> list[str]:
    """What a page's links become in the frontier: extracted, resolved, canonicalised."""
    found = extract_links(body, page, content_type).links
    return [u for u in (canonicalize(link) for link in found) if u is not None]


# --- point 8: the query of a link on a non-UTF-8 page ---------------------------------------


def test_url_point_8_query_in_the_page_charset_from_the_header() -> None:
    body = f'<a href="/s?q={PRIVET}">x</a><a href="/{PRIVET}">y</a>'.encode("cp1251")
    got = _admitted(PAGE, body, "text/html; charset=windows-1251")
    # the query in the page's encoding (as browsers and w3lib), the path always in UTF-8
    assert got == [
        "http://h.test/s?q=%EF%F0%E8%E2%E5%F2",
        "http://h.test/%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82",
    ]


def test_url_point_8_query_in_the_page_charset_from_meta() -> None:
    body = f'<meta charset="windows-1251"><a href="?q={PRIVET}">x</a>'.encode("cp1251")
    assert _admitted(PAGE, body, "text/html") == ["http://h.test/a/b/c.html?q=%EF%F0%E8%E2%E5%F2"]


def test_url_point_8_unencodable_characters_and_utf8_pages() -> None:
    # a character the page's encoding lacks becomes an HTML numeric reference, as browsers do
    body = b'<a href="/s?q=\xe9&#20013;#\xe9">x</a>'
    got = _admitted(PAGE, body, "text/html; charset=iso-8859-1")
    assert got == ["http://h.test/s?q=%E9%26%2320013%3B"]
    assert resolve(Base.of(PAGE, "cp1252"), "/s?q=\u4e2d") == "http://h.test/s?q=%26%2320013%3B"
    # UTF-8 and UTF-16 pages encode queries as UTF-8
    utf8 = f'<a href="/s?q={PRIVET}">x</a>'
    expected = ["http://h.test/s?q=%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82"]
    assert _admitted(PAGE, utf8.encode(), "text/html; charset=utf-8") == expected
    assert _admitted(PAGE, utf8.encode("utf-16-le"), "text/html; charset=utf-16le") == expected


# --- point 9: backslashes ---------------------------------------------------------------------


def test_url_point_9_backslash_is_slash() -> None:
    body = b'<a href="..\\img\\a.html">x</a><a href="\\\\other.test\\p">y</a>'
    assert _admitted(PAGE, body, "text/html") == [
        "http://h.test/a/img/a.html",
        "http://other.test/p",
    ]
    assert canonicalize("http:\\\\h.test\\a\\b") == "http://h.test/a/b"
    # in the query a backslash is data, not a separator
    assert canonicalize("http://h.test/a?x=\\y") == "http://h.test/a?x=%5Cy"


# --- point 10: IDNA -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://fa\u00df.de/", "http://xn--fa-hia.de/"),  # not fass.de, another domain
        ("http://\u03c2.example/", "http://xn--3xa.example/"),  # final sigma kept
        ("http://M\u00fcnchen.DE/x", "http://xn--mnchen-3ya.de/x"),
        ("http://a\u200db.example/", None),  # ZWJ outside its context: refused, as browsers
    ],
)
def test_url_point_10_idna_uts46_nontransitional(url: str, expected: str | None) -> None:
    assert canonicalize(url) == expected


def test_url_point_10_idna_in_links() -> None:
    body = '<a href="http://fa\u00df.de/x">x</a>'.encode()
    assert _admitted(PAGE, body, "text/html; charset=utf-8") == ["http://xn--fa-hia.de/x"]


# --- point 12: scope entries that cannot match ---------------------------------------------------


def _settings(allow: list[str], seeds: list[str] | None = None) -> dict[str, object]:
    return {
        "crawl": {"seeds": seeds or ["http://example.com/"], "output_dir": "out"},
        "scope": {"allow_domains": allow},
    }


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("https://example.com", "scheme"),
        ("example.com:8080", "port"),
        ("example.com/path", "path"),
        ("", "empty"),
        ("exa mple.com", "not a host name"),
        ("*", "not a host name"),
        ("a.*.example.com", "not a host name"),
    ],
)
def test_url_point_12_scope_entries_that_cannot_match_are_refused(
    entry: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=r"^scope\.allow_domains\[1\]: .*" + problem):
        check_scope(parse(_settings(["example.com", entry])))


def test_url_point_12_scope_entries_are_normalised(tmp_path: Path) -> None:
    s = parse(
        _settings(
            ["M\u00fcnchen.DE", "Fa\u00df.de.", "*.Example.com", "[::1]", "127.0.0.1"],
            seeds=["http://xn--mnchen-3ya.de/"],
        )
    )
    assert check_scope(s) == (
        "xn--mnchen-3ya.de",
        "xn--fa-hia.de",
        "*.example.com",
        "::1",
        "127.0.0.1",
    )
    f = Frontier.from_settings(s, tmp_path / "state")
    try:
        assert f.in_scope("http://xn--mnchen-3ya.de/")
        assert f.in_scope("http://www.xn--mnchen-3ya.de/")
        assert f.in_scope("http://xn--fa-hia.de/")
        assert not f.in_scope("http://fass.de/")
        # "*." means the subdomains only
        assert f.in_scope("http://www.example.com/")
        assert f.in_scope("http://a.b.example.com/")
        assert not f.in_scope("http://example.com/")
        assert not f.in_scope("http://badexample.com/")
        assert f.in_scope("http://[::1]/")
        assert not f.in_scope("http://[::1]:8080/")  # not a seed's port (test_scope_ports.py)
        assert f.in_scope("http://127.0.0.1/")
    finally:
        f.close()


@pytest.mark.parametrize(
    ("allow", "seed"),
    [
        (["example.com"], "http://example.org/"),
        (["*.example.com"], "http://example.com/"),
        (["example.com"], "http://exa mple.com/"),
    ],
)
def test_url_point_12_seed_outside_the_scope_is_a_config_error(allow: list[str], seed: str) -> None:
    with pytest.raises(ConfigError, match=r"^crawl\.seeds\[1\]: "):
        check_scope(parse(_settings(allow, seeds=["http://www.example.com/", seed])))


def test_url_point_12_excluded_seed_is_a_config_error() -> None:
    raw = _settings([], seeds=["http://example.com/", "http://example.com/a.pdf"])
    raw["scope"] = {"exclude": [r"\.pdf$"]}
    with pytest.raises(ConfigError, match=r"^crawl\.seeds\[1\]: .*exclude"):
        check_scope(parse(raw))


def test_url_point_12_cli_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for allow in (["https://example.com"], ["example.com:8080"]):
        config = tmp_path / "crawl.toml"
        config.write_text(
            render_toml(
                {
                    "crawl": {"seeds": ["http://example.com/"], "output_dir": str(tmp_path)},
                    "scope": {"allow_domains": allow},
                }
            )
        )
        assert main(["--config", str(config)]) == 2
        assert "scope.allow_domains[0]:" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()  # refused before the crawl began


# --- also seen ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "HTTP/2 stream 1 was not closed cleanly: REFUSED_STREAM (err 7)",
        "HTTP/2 stream 3 was not closed cleanly before end of the underlying stream",
        "HTTP/2 stream 5 was not closed cleanly: CANCEL (err 8)",
    ],
)
def test_also_seen_http2_refused_stream_and_goaway_are_transient(message: str) -> None:
    kind = map_curl_error(CURLE_HTTP2_STREAM, message)
    assert kind.transient, kind


def test_also_seen_http2_stream_protocol_error_is_not_retried() -> None:
    message = "HTTP/2 stream 1 was not closed cleanly: PROTOCOL_ERROR (err 1)"
    assert not map_curl_error(CURLE_HTTP2_STREAM, message).transient


@pytest.mark.parametrize("coding", ["gzip, identity", "identity, gzip", "GZIP ,identity", "gzip,"])
def test_also_seen_stacked_identity_coding_is_decoded(coding: str) -> None:
    html = b"<a href=/x>x</a>" * 50
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    decoder = decoder_for(coding, 1 << 20)
    assert decoder is not None, coding
    decoder.feed(packer.compress(html) + packer.flush())
    assert decoder.finish() == html
    assert decoder_for("identity, identity", 100) is None
