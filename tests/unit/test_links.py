"""Link extraction: pure, never raises, http(s) only, WHATWG URL resolution, deduplicated."""

from __future__ import annotations

import codecs
import dataclasses
import html

import can_ada
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_crawl.config import CrawlSettings, FetchSection
from frontier_crawl.parse import LinkParser, PageLinks, Parser, extract_links
from frontier_crawl.parse.charset import _SUPPORTED, header_codec
from frontier_crawl.parse.resolve import MAX_URL_CHARS, Base, resolve, resolve_all

PAGE = "http://h.test/a/b.html"


def links(markup: str | bytes, url: str = PAGE, content_type: str | None = None) -> list[str]:
    body = markup.encode() if isinstance(markup, str) else markup
    return list(extract_links(body, url, content_type).links)


def anchors(*hrefs: str) -> str:
    return "".join(f'<a href="{html.escape(h)}">x</a>' for h in hrefs)


# --- resolution ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("/x", "http://h.test/x"),
        ("c.html", "http://h.test/a/c.html"),
        ("../x", "http://h.test/x"),
        ("../../x", "http://h.test/x"),
        ("../../../../x?q=1", "http://h.test/x?q=1"),
        ("./c/../d", "http://h.test/a/d"),
        ("//other.test/p", "http://other.test/p"),
        ("https://other.test/p?q", "https://other.test/p?q"),
        ("HTTPS://Other.test/P", "https://other.test/P"),
        ("..\\img\\a.html", "http://h.test/img/a.html"),
        ("\\\\other.test\\p", "http://other.test/p"),
        ("/%2e%2E/x", "http://h.test/x"),
        ("http:x", "http://h.test/a/x"),
        ("/a b\"<>`{}", "http://h.test/a%20b%22%3C%3E%60%7B%7D"),
        ("?q=a b'", "http://h.test/a/b.html?q=a%20b%27"),
        ("?q=2", "http://h.test/a/b.html?q=2"),
        ("", "http://h.test/a/b.html"),
        ("#top", "http://h.test/a/b.html"),
        ("/p;jsessionid=1?x", "http://h.test/p;jsessionid=1?x"),
        ("http://[::1]:8080/v6", "http://[::1]:8080/v6"),
    ],
)
def test_resolves_as_browsers_do(href: str, expected: str) -> None:
    assert links(anchors(href)) == [expected]


def test_relative_beyond_root_from_a_path_without_slash() -> None:
    assert links(anchors("../../x"), url="http://h/a") == ["http://h/x"]


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",
        " JavaScript:void(0)",
        "mailto:a@b.test",
        "data:text/html,<a>",
        "file:///etc/passwd",
        "gopher://h.test/",
        "ftp://h.test/f",
        "tel:+100",
        "about:blank",
        "http://[::1/",
        "https://[::1",
        "http://[not-an-ip]/",
        "http://\u00e9\uff03/",  # NFKC-normalises to a '#' inside the host: urlsplit refuses
    ],
)
def test_non_http_and_invalid_urls_are_dropped(href: str) -> None:
    assert links(anchors(href, "/kept")) == ["http://h.test/kept"]


def test_whatwg_stripping_of_controls_spaces_tabs_and_newlines() -> None:
    href = "\x1f \n\thttp://h.test/pa\tt\nh\r \x01\x0b "
    assert links(anchors(href)) == ["http://h.test/path"]
    # NUL never reaches us through HTML (it becomes U+FFFD), but resolve() strips it too
    assert resolve(Base.of(PAGE), "\x00 /x\x00") == "http://h.test/x"


def test_fragments_dropped_and_duplicates_removed_in_first_seen_order() -> None:
    body = anchors("/b#1", "/a", "/b#2", "http://h.test/a", "/c", "/b")
    assert links(body) == ["http://h.test/b", "http://h.test/a", "http://h.test/c"]


def test_urls_longer_than_the_limit_are_dropped() -> None:
    near = "http://h.test/" + "x" * (MAX_URL_CHARS - len("http://h.test/"))
    too_long = near + "y"
    ten_kb = "/" + "z" * 10_240
    assert links(anchors(near, too_long, ten_kb)) == [near]


def test_a_long_relative_href_that_resolves_short_is_kept() -> None:
    assert links(anchors("../" * 4000 + "x")) == ["http://h.test/x"]


# --- elements and base -----------------------------------------------------------------------


def test_frame_iframe_src_and_area_href() -> None:
    body = (
        '<map><area href="/area"><area nohref></map>'
        '<iframe src="/iframe" href="/not-this"></iframe><a src="/not-this-either">x</a>'
    )
    assert links(body) == ["http://h.test/area", "http://h.test/iframe"]
    framed = '<frameset><frame src="f1.html"><frame src="/f2"></frameset>'
    assert links(framed) == ["http://h.test/a/f1.html", "http://h.test/f2"]


def test_order_is_anchors_then_areas_then_iframes_each_in_document_order() -> None:
    body = '<iframe src="/i1"></iframe><a href="/a1">x</a><iframe src="/i2"></iframe><a href="/a2">'
    assert links(body) == [
        "http://h.test/a1",
        "http://h.test/a2",
        "http://h.test/i1",
        "http://h.test/i2",
    ]


def test_base_href_resolved_against_page_and_applies_to_every_link() -> None:
    body = '<a href="early">x</a><base href="../base/"><base href="/ignored/">' + anchors("late")
    result = extract_links(body.encode(), "http://h.test/a/b/c.html")
    assert result.links == ("http://h.test/a/base/early", "http://h.test/a/base/late")
    assert result.base_url == "http://h.test/a/base/"


def test_absolute_base_href_on_another_host() -> None:
    assert links('<base href="https://cdn.test/x/">' + anchors("y", "/z")) == [
        "https://cdn.test/x/y",
        "https://cdn.test/z",
    ]


@pytest.mark.parametrize("base", ["javascript:void(0)", "ftp://h.test/", "http://[::1/", "data:,"])
def test_non_http_base_href_is_ignored(base: str) -> None:
    result = extract_links(f'<base href="{base}"><a href="x">'.encode(), PAGE)
    assert result.links == ("http://h.test/a/x",)
    assert result.base_url == PAGE


def test_base_without_href_is_skipped_for_the_next_one() -> None:
    assert links('<base target="_top"><base href="/d/">' + anchors("x")) == ["http://h.test/d/x"]


# --- nofollow --------------------------------------------------------------------------------


def test_rel_nofollow_skips_only_that_link() -> None:
    body = (
        '<a href="/no" rel="external NoFollow">x</a><area href="/no2" rel="nofollow">'
        '<a href="/yes" rel="nofollowing">y</a><a href="/yes2" rel="ugc">z</a>'
    )
    result = extract_links(body.encode(), PAGE)
    assert result.links == ("http://h.test/yes", "http://h.test/yes2")
    assert result.nofollow is False


def test_rel_nofollow_does_not_apply_to_frames() -> None:
    assert links('<iframe src="/i" rel="nofollow"></iframe>') == ["http://h.test/i"]


@pytest.mark.parametrize(
    "meta",
    [
        '<meta name="robots" content="nofollow">',
        '<meta name="ROBOTS" content="noindex, NOFOLLOW">',
        "<meta name=robots content=none>",
        '<meta name=" Robots " content="noarchive nofollow">',
    ],
)
def test_meta_robots_nofollow_means_no_links(meta: str) -> None:
    result = extract_links((meta + anchors("/x")).encode(), PAGE)
    assert result == PageLinks((), True, PAGE)


@pytest.mark.parametrize(
    "meta",
    [
        '<meta name="robots" content="noindex">',
        '<meta name="googlebot" content="nofollow">',
        '<meta name="description" content="nofollow">',
        '<meta name="robots">',
    ],
)
def test_other_meta_tags_do_not_stop_links(meta: str) -> None:
    assert links(meta + anchors("/x")) == ["http://h.test/x"]


def test_supported_encodings_are_python_codec_names() -> None:
    """The WHATWG encodings are written out as codec names (no lookups when the module is
    imported): each must be what ``codecs.lookup`` calls it, or a page in it would be refused."""
    assert len(_SUPPORTED) == 36
    assert {name: codecs.lookup(name).name for name in _SUPPORTED} == {n: n for n in _SUPPORTED}
    for label in ("shift_jis", "windows-1252", "latin1", "euc-kr", "utf-16", "x-sjis"):
        assert header_codec(f"text/html; charset={label}") in _SUPPORTED


# --- hostile bytes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/html",
        "text/html; charset=utf-8",
        "text/html; charset=shift_jis",
        "text/html; charset=utf-16",
        "text/html; charset=utf-7",
        "text/html; charset=base64",
        "text/html; charset=no-such-charset",
        'text/html; charset="',
        "text/html; charset=",
    ],
)
def test_invalid_utf8_with_wrong_charset_header_still_yields_ascii_links(
    content_type: str | None,
) -> None:
    body = b'\xc3(\x80\xff\xfe<p>\xe9\xed\xa0\x80</p><a href="/ok">x</a><a href="/b\xe9">y</a>'
    got = links(body, content_type=content_type)
    if content_type is not None and "utf-16" in content_type:
        assert got == []  # the (wrong) header wins: the bytes are UTF-16 garbage, and no crash
    else:
        assert got[0] == "http://h.test/ok"
        assert len(got) == 2


def test_charset_header_decodes_non_ascii_hrefs() -> None:
    body = '<a href="/\u0436">x</a>'.encode("koi8-r")
    assert links(body, content_type="text/html; charset=KOI8-R") == ["http://h.test/%D0%B6"]


def test_meta_charset_used_when_the_header_has_none() -> None:
    body = '<meta charset="windows-1251"><a href="/\u043f">x</a>'.encode("cp1251")
    assert links(body, content_type="text/html") == ["http://h.test/%D0%BF"]


@pytest.mark.parametrize(
    ("header", "codec"),
    [
        ("text/html; charset=ISO-8859-1", "cp1252"),
        ("text/html;charset=us-ascii", "cp1252"),
        ('text/html; charset="utf-8"', "utf-8"),
        ("text/html; charset=windows-874", "cp874"),
        ("text/html; charset=utf-7", None),
        ("text/html; charset=rot13", None),
        ("text/html; charset=idna", None),
        ("text/html", None),
    ],
)
def test_header_charset_mapping(header: str, codec: str | None) -> None:
    assert header_codec(header) == codec


def test_nul_bytes_and_garbage() -> None:
    body = b"\x00\x00<a href='/a\x00b'>\x00</a><<<>>><a href=/c\x00"
    got = links(body)
    assert got[0] == "http://h.test/a%EF%BF%BDb"
    assert all(u.startswith("http://h.test/") for u in got)


def test_empty_and_non_html_bodies() -> None:
    assert links(b"") == []
    assert links(b"\x89PNG\r\n\x1a\n\x00\x00") == []
    assert links("<a href=/x>", url="") == []
    assert links("<a href='http://ok.test/'>", url="not a url") == ["http://ok.test/"]


def test_ten_thousand_links() -> None:
    body = "".join(f'<li><a href="/p/{i}">{i}</a></li>' for i in range(10_000))
    got = links(body)
    assert len(got) == 10_000
    assert got[0] == "http://h.test/p/0"
    assert got[-1] == "http://h.test/p/9999"


_HOSTILE_HEADERS = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.sampled_from(["utf-8", "latin-1", "shift_jis", "utf-16", "gb2312", "x"]).map(
        lambda c: f"text/html; charset={c}"
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=2000),
    url=st.sampled_from([PAGE, "", "https://h.test", "http://[::1/", "mailto:x"]),
    content_type=_HOSTILE_HEADERS,
)
def test_arbitrary_bytes_never_raise_and_yield_http_urls(
    body: bytes, url: str, content_type: str | None
) -> None:
    result = extract_links(body, url, content_type)
    assert all(u.startswith(("http://", "https://")) for u in result.links)
    assert len(set(result.links)) == len(result.links)


def _joined(pieces: list[str], *, min_size: int = 0, max_size: int) -> st.SearchStrategy[str]:
    """Strings of ``min_size`` to ``max_size`` of ``pieces``, joined: each byte of a binary
    draws one piece (its value modulo the number of pieces). The same strings as joining
    ``st.lists(st.sampled_from(pieces))``, shrinking the same way (shorter, then towards the
    first pieces), at about half the CPU per example: a binary is one choice for Hypothesis,
    where a list is one per element and its engine spends most of the time mutating them."""
    return st.binary(min_size=min_size, max_size=max_size).map(
        lambda b: "".join(pieces[i % len(pieces)] for i in b)
    )


_HREF_PIECES = (
    ["http://", "https://", "HTTP://", "//", "/", "./", "../", "..", ".", "?", "#", ";", ":",
     "a", "b.c", "%2e", "[", "]", "::1", "@", " ", "\t", "\x00", "h.test", "javascript:",
     "mailto:", "\u00e9", "x:y", "//x", "\\", "%2E", "'", "|", "xn--", "0x7f", "1.2.3.4", "H",
     ":80", "@"]
)  # fmt: skip
_BASES = st.sampled_from(
    ["http://h.test/a/b.html", "http://h.test", "http://h.test/", "https://h.test/a/",
     "http://h.test/a/./b/c", "http://h.test/a//b/c", "http://h.test/a;p/b;q?x=1",
     "HTTP://H.test/A", "http://[::1]:81/x/y", "ftp://h.test/d/", "http://h.test/a/b#frag",
     "http://h.test?q"]
)  # fmt: skip


def _reference(base: str, href: str) -> str | None:
    """What the WHATWG URL parser (Ada) makes of ``href`` on ``base``, the slow obvious way:
    http(s) only, fragment dropped, at most MAX_URL_CHARS."""
    try:
        parsed = can_ada.parse(href) if not can_ada.can_parse(base) else can_ada.parse(base) + href
    except (ValueError, TypeError):
        return None
    if parsed.protocol not in ("http:", "https:"):
        return None
    url = parsed.href.split("#")[0]
    return url if len(url) <= MAX_URL_CHARS else None


# 3300 examples, not 3000: _joined repeats a few more strings than a list of pieces does; 3300
# of them test at least as many distinct hrefs as 3000 lists did (about 3000)
@settings(max_examples=3300, deadline=None)
@given(base=_BASES, href=_joined(_HREF_PIECES, max_size=8))
def test_fast_paths_agree_with_whatwg(base: str, href: str) -> None:
    assert resolve(Base.of(base), href) == _reference(base, href)


@settings(max_examples=330, deadline=None)  # 330, not 300: as for the 3300 above
@given(base=_BASES, hrefs=st.lists(_joined(_HREF_PIECES, max_size=6), max_size=6))
def test_extract_links_matches_reference_through_html(base: str, hrefs: list[str]) -> None:
    hrefs = [h.replace("\x00", "") for h in hrefs]  # HTML turns NUL into U+FFFD
    expected = [u for u in (_reference(base, h) for h in hrefs) if u is not None]
    assert links(anchors(*hrefs), url=base) == list(dict.fromkeys(expected))


# Mostly well-formed hrefs: the shapes resolve() answers with one regular expression
# (absolute, root-relative, relative), and the near misses that must not take that shortcut.
_CLEAN_PIECES = (
    ["http://", "https://", "h.test", "a", "b.html", "/", "?", "q=1", "&", ":", ":80", "@",
     ".", "..", "//", ";", "#", " ", "\t", "[", "]", "\u00e9", "%2e", "\x7f", "\x1f", "\\",
     "'", "|", "^", "`", "{", "H", "xn--a", "9", "0x1", "_", "-"]
)  # fmt: skip


@settings(max_examples=3400, deadline=None)  # 3400, not 3000: as above (about 2990 distinct)
@given(base=_BASES, href=_joined(_CLEAN_PIECES, min_size=1, max_size=7))
def test_regex_shortcuts_agree_with_whatwg(base: str, href: str) -> None:
    assert resolve(Base.of(base), href) == _reference(base, href)


@settings(max_examples=300, deadline=None)
@given(
    bases=st.lists(_BASES, min_size=2, max_size=2),
    hrefs=st.lists(_joined(_CLEAN_PIECES, min_size=1, max_size=7), max_size=6),
)
def test_resolve_all_agrees_with_whatwg_when_the_shapes_are_remembered(
    bases: list[str], hrefs: list[str]
) -> None:
    # each href is met again on a second base and a second time on each: resolve_all then
    # answers from the shapes remembered the first time, without resolve()
    for base in bases:
        expected = [u for u in (_reference(base, h) for h in hrefs) if u is not None]
        assert resolve_all(Base.of(base), hrefs) == expected
        assert resolve_all(Base.of(base), hrefs) == expected


@pytest.mark.parametrize(
    ("url", "origin", "directory"),
    [
        ("HTTP://H.test:80/a/b?q#f", "http://h.test", "http://h.test/a/"),
        ("https://h.test", "https://h.test", "https://h.test/"),
        ("http://[::1]:81/x/./y/../z", "http://[::1]:81", "http://[::1]:81/x/"),
        ("ftp://h.test/d/", "", ""),
    ],
)
def test_base_of(url: str, origin: str, directory: str) -> None:
    base = Base.of(url)
    assert (base.origin, base.directory) == (origin, directory)
    assert base.url == (_reference(url, "") or base.url)
    assert Base.of("not a url") == Base("")
    assert Base.of(PAGE, "cp1251").encoding == "cp1251"
    assert Base.of(PAGE, "utf-16-le").encoding is None


# --- the Parser seam -------------------------------------------------------------------------


def test_link_parser_implements_parser_and_filters_media_types() -> None:
    parser: Parser = LinkParser(parse_types=("Text/HTML",))
    body = b'<a href="/x">x</a>'
    assert parser.parse(PAGE, "text/html; charset=utf-8", body).links == ("http://h.test/x",)
    assert parser.parse(PAGE, "TEXT/HTML", body).links == ("http://h.test/x",)
    assert parser.parse(PAGE, "application/xhtml+xml", body) == PageLinks((), False, PAGE)
    assert parser.parse(PAGE, "", body).links == ()


def test_link_parser_from_settings() -> None:
    settings_ = CrawlSettings(fetch=FetchSection(parse_types=("application/xhtml+xml",)))
    parser = LinkParser.from_settings(settings_)
    assert parser.parse_types == ("application/xhtml+xml",)
    assert LinkParser().parse_types == ("text/html", "application/xhtml+xml")


def test_page_links_is_frozen() -> None:
    result = extract_links(b"", PAGE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.nofollow = True  # type: ignore[misc]
