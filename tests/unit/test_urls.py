"""Tests of URL canonicalisation, joining, host keys and digests (frontier/urls.py)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import can_ada
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier_crawl.frontier import urls
from frontier_crawl.frontier.urls import (
    MAX_URL_LENGTH,
    canonicalize,
    canonicalize_with_origin,
    digest_partition,
    host_hash,
    host_of,
    join,
    origin,
    origin_digest,
    url_digest,
)

HYPOTHESIS = settings(
    max_examples=400, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _both_paths(url: str) -> str | None:
    """canonicalize() and the general path must agree on every input."""
    result = canonicalize(url)
    assert urls._canonicalize_slow(url) == result
    return result


# ----------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # scheme and host are lower-cased
        ("HTTP://Example.COM/Path", "http://example.com/Path"),
        ("hTTpS://WWW.Example.org/", "https://www.example.org/"),
        # trailing dot of the host
        ("http://example.com./", "http://example.com/"),
        # default ports dropped, others kept, leading zeros and empty port
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://a.demo:8080/x", "http://a.demo:8080/x"),
        ("http://example.com:0080/", "http://example.com/"),
        ("http://example.com:/x", "http://example.com/x"),
        # fragment dropped
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://example.com/a?q=1#frag?x", "http://example.com/a?q=1"),
        ("http://example.com#", "http://example.com/"),
        # empty path
        ("http://example.com", "http://example.com/"),
        ("http://example.com?q", "http://example.com/?q"),
        # userinfo dropped
        ("http://user:secret@example.com/", "http://example.com/"),
        ("http://a@b@example.com/", "http://example.com/"),
        # empty query dropped, query order kept
        ("http://example.com/a?", "http://example.com/a"),
        ("http://example.com/a?b=2&a=1&b=1", "http://example.com/a?b=2&a=1&b=1"),
        # surrounding whitespace, embedded tab/newline
        ("  \thttp://example.com/a\n  ", "http://example.com/a"),
        ("http://exa\nmple.com/a\tb", "http://example.com/ab"),
    ],
)
def test_scheme_host_port_fragment_rules(url: str, expected: str) -> None:
    assert _both_paths(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.demo/a/./b/../c", "http://a.demo/a/c"),
        ("http://a.demo/a/b/..", "http://a.demo/a/"),
        ("http://a.demo/a/b/.", "http://a.demo/a/b/"),
        ("http://a.demo/..", "http://a.demo/"),
        ("http://a.demo/../../../etc/passwd", "http://a.demo/etc/passwd"),
        ("http://a.demo/./", "http://a.demo/"),
        ("http://a.demo/a//b/../c", "http://a.demo/a//c"),
        ("http://a.demo/.hidden/..x/x../...", "http://a.demo/.hidden/..x/x../..."),
        ("http://a.demo/a/%2e%2E/b/%2E", "http://a.demo/b/"),
        ("http://a.demo/a?x=/../y", "http://a.demo/a?x=/../y"),
    ],
)
def test_dot_segments(url: str, expected: str) -> None:
    assert _both_paths(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # unreserved escapes decoded
        ("http://a.demo/%7euser/%41%62%2D%2e%5F%30", "http://a.demo/~user/Ab-._0"),
        # other escapes upper-cased, reserved escapes kept
        ("http://a.demo/a%2fb%3f%c3%a9", "http://a.demo/a%2Fb%3F%C3%A9"),
        ("http://a.demo/?q=a%26b%3dc", "http://a.demo/?q=a%26b%3Dc"),
        # malformed escapes
        ("http://a.demo/100%", "http://a.demo/100%25"),
        ("http://a.demo/%zz%4", "http://a.demo/%25zz%254"),
        ("http://a.demo/%%41", "http://a.demo/%25A"),
        # characters not allowed in the component are encoded (UTF-8)
        ("http://a.demo/a b", "http://a.demo/a%20b"),
        ('http://a.demo/"<>^`{|}', "http://a.demo/%22%3C%3E%5E%60%7B%7C%7D"),
        ('http://a.demo/?"<>\\^`{|}', "http://a.demo/?%22%3C%3E%5C%5E%60%7B%7C%7D"),
        ("http://a.demo/caf\u00e9", "http://a.demo/caf%C3%A9"),
        ("http://a.demo/\u65e5\u672c", "http://a.demo/%E6%97%A5%E6%9C%AC"),
        ("http://a.demo/a\x00b\x7f", "http://a.demo/a%00b%7F"),
        ("http://a.demo/?q=caf\u00e9 1", "http://a.demo/?q=caf%C3%A9%201"),
        # reserved characters left alone; '?' allowed in the query; "'" in the query is
        # encoded by the WHATWG parser (the query percent-encode set of http and https)
        (
            "http://a.demo/!$&'()*+,;=:@[]/x?a=?/:@!$'()*+,;[]",
            "http://a.demo/!$&'()*+,;=:@[]/x?a=?/:@!$%27()*+,;[]",
        ),
    ],
)
def test_percent_encoding(url: str, expected: str) -> None:
    assert _both_paths(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://B\u00fccher.example/", "http://xn--bcher-kva.example/"),
        ("http://B\u00dcCHER.Example./x", "http://xn--bcher-kva.example/x"),
        ("http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"),
        ("http://\u65e5\u672c\u3002jp/", "http://xn--wgv71a.jp/"),
        ("http://ex%61mple.com/", "http://example.com/"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://[0:0:0:0:0:0:0:1]:80/", "http://[::1]/"),
        ("http://[2001:DB8::A]:8443/", "http://[2001:db8::a]:8443/"),
        ("http://under_score.example/", "http://under_score.example/"),
        ("http://localhost/", "http://localhost/"),
    ],
)
def test_hosts(url: str, expected: str) -> None:
    assert _both_paths(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "mailto:someone@example.com",
        "file:///etc/passwd",
        "data:text/html,<b>x</b>",
        "gopher://example.com/",
        "ftp://example.com/file",
        "httpx://example.com/",
        "//example.com/",
        "/relative/path",
        "",
        "http://",
        "http://:80/",
        "http://user@/",
    ],
)
def test_not_crawlable(url: str) -> None:
    assert _both_paths(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1/",
        "http://[::1]x/",
        "http://[::g]/",
        "http://[fe80::1%25eth0]/",
        "http://[v1.fe]/",
        "http://::1/",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:99999999999999999999/",
        "http://example.com:8o/",
        "http://example.com:-1/",
        "http://example.com:\u0661\u0662/",
        "http://exa mple.com/",
        "http://exa\x00mple.com/",
        "http://example..com/",
        "http://.example.com/",
        "http://example.com../",
        "http://ex%2Fample.com/",
        "http://ex%zzample.com/",
        "http://ex%ffample.com/",
        "http://" + "a" * 64 + ".com/",
        "http://" + ".".join(["abcdefghi"] * 26) + "/",
        "http://xn--zz.example/",
        "http://\u00e9" + "a" * 70 + ".example/",
        "http://a\uff0fb.example/",
        "http://256.1.1.1/",
        "http://example.123/",
        "http://a.demo/\ud800",
        "http://a.demo/?q=\udfff",
    ],
)
def test_invalid_host_port_or_encoding(url: str) -> None:
    assert _both_paths(url) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # the WHATWG parser supplies the "//" of http(s) and skips extra slashes
        ("http:example.com", "http://example.com/"),
        ("http:/example.com/", "http://example.com/"),
        ("http:///path", "http://path/"),
        # a backslash is a slash before the query (so not part of the userinfo here)
        ("http://a.demo\\@evil.com/", "http://a.demo/@evil.com/"),
        ("http:\\\\a.demo\\b", "http://a.demo/b"),
        # IPv4 in its other forms, as browsers read them
        ("http://01.2.3.4/", "http://1.2.3.4/"),
        ("http://1.2.3/", "http://1.2.0.3/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        # RFC 5952: a single zero group is not compressed
        ("http://[1:0:1:1:1:1:1:1]/", "http://[1:0:1:1:1:1:1:1]/"),
    ],
)
def test_read_as_browsers_do(url: str, expected: str) -> None:
    assert _both_paths(url) == expected


def test_length_limit() -> None:
    head = "http://a.demo/"
    at_limit = head + "a" * (MAX_URL_LENGTH - len(head))
    assert _both_paths(at_limit) == at_limit
    assert _both_paths(at_limit + "b") is None
    assert _both_paths(head + "x" * 10_240) is None
    # the limit applies after canonicalisation: an encoded character is 3 long, a fragment 0
    assert _both_paths(head + " x" * 2100) is None
    assert _both_paths(head + "#" + "f" * 10_240) == head


def test_fast_path_returns_the_input_object() -> None:
    url = "https://www.example.org/a/b-c_d.html?x=1&y=%20z"
    assert canonicalize(url) is url


# ----------------------------------------------------------------------------- properties

_HOSTS = st.sampled_from(
    [
        "example.com",
        "Example.COM",
        "a.demo:8080",
        "a.demo:80",
        "a.demo:443",
        "a.demo.",
        "B\u00fccher.example",
        "xn--bcher-kva.example",
        "[::1]",
        "[::FFFF:1.2.3.4]:81",
        "127.0.0.1",
        "user:pw@host.example",
        "",
        "[::1",
        "bad host",
        "h:0",
        "h:70000",
        "%65x.com",
        "\u65e5\u672c.jp",
    ]
)
_PATH_CHARS = st.sampled_from(
    [
        *"/./../a-Z0~_%2e%41%7e%zz %\\\"<>^`{|}?#[]@!$&'()*+,;=:\u00e9\u65e5\x00\x7f\t",
        *["%2F", "%2f", "%C3%A9", "%c3", "..", "/..", "/.", "//"],
    ]
)
_URLS = st.builds(
    lambda scheme, host, path, tail: f"{scheme}://{host}{path}{tail}",
    st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "javascript"]),
    _HOSTS,
    st.lists(_PATH_CHARS, max_size=20).map("".join),
    st.sampled_from(["", "?", "?a=1&b", "#f", "?q=%41#x", "?x=/../y"]),
)


@HYPOTHESIS
@given(_URLS)
def test_canonicalize_is_idempotent(url: str) -> None:
    result = _both_paths(url)
    if result is not None:
        assert result.isascii()
        assert result.startswith(("http://", "https://"))
        assert len(result) <= MAX_URL_LENGTH
        assert "#" not in result
        assert _both_paths(result) == result


@HYPOTHESIS
@given(_URLS | st.text(max_size=60) | st.text(max_size=40).map(lambda t: "http://a.demo/" + t))
def test_canonicalize_with_origin_is_canonicalize_then_origin(url: str) -> None:
    """Admission's one call gives what canonicalize, origin and url_digest give, on the fast
    path (the match's origin) and the slow one."""
    canonical = canonicalize(url)
    both = canonicalize_with_origin(url)
    if canonical is None:
        assert both is None
    else:
        assert both == (canonical, origin(canonical))
        assert origin_digest(canonical, both[1]) == url_digest(canonical)


@HYPOTHESIS
@given(st.text(max_size=60))
def test_canonicalize_never_raises_on_any_text(text: str) -> None:
    for url in (text, "http://" + text, "http://a.demo/" + text):
        result = _both_paths(url)
        if result is not None:
            assert _both_paths(result) == result


# ----------------------------------------------------------------------------- join

RFC_BASE = "http://a/b/c/d;p?q"


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        # RFC 3986 section 5.4.1 (results canonicalised: fragment dropped, "/" path)
        ("g:h", None),
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g/"),
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q"),
        ("g#s", "http://a/b/c/g"),
        ("g?y#s", "http://a/b/c/g?y"),
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y"),
        ("", "http://a/b/c/d;p?q"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        # RFC 3986 section 5.4.2
        ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"),
        ("/./g", "http://a/g"),
        ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"),
        ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"),
        ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"),
        ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g"),
        ("g#s/../x", "http://a/b/c/g"),
        ("http:g", "http://a/b/c/g"),  # the backward-compatible reading, as browsers
        # others
        ("HTTPS://Other.example:443/x", "https://other.example/x"),
        ("https://other.example/x", "https://other.example/x"),
        ("  /spaced \n", "http://a/spaced"),
        ("mailto:x@y", None),
        ("javascript:void(0)", None),
        ("http://[::1", None),
    ],
)
def test_join_rfc3986_examples(href: str, expected: str | None) -> None:
    assert join(RFC_BASE, href) == expected


def test_join_with_non_canonical_or_odd_bases() -> None:
    assert join("HTTP://A.demo:80", "x") == "http://a.demo/x"
    assert join("http://a.demo", "x?y") == "http://a.demo/x?y"
    assert join("http://a.demo", "") == "http://a.demo/"
    assert join("http://a.demo/p#frag", "") == "http://a.demo/p"
    assert join("not a url", "x") is None
    assert join("http://[::1", "/x") is None


_SEGMENTS = st.sampled_from(["a", "b", "..", ".", "c.html", "d%41", "e f", "g;p", "%zz"])
_REL = st.builds(
    lambda lead, segs, tail: lead + "/".join(segs) + tail,
    st.sampled_from(["", "/", "./", "../", "//h.example/"]),
    st.lists(_SEGMENTS, max_size=6),
    st.sampled_from(["", "?q=1", "#f", "?a=b#c", "/"]),
)
_BASES = st.builds(
    lambda segs, query: "http://a.demo/" + "/".join(segs) + query,
    st.lists(st.sampled_from(["x", "y", "z.html"]), max_size=4),
    st.sampled_from(["", "?k=v"]),
)


@HYPOTHESIS
@given(_BASES, _REL)
def test_join_agrees_with_whatwg(base: str, href: str) -> None:
    try:
        expected = canonicalize((can_ada.parse(base) + href).href)
    except ValueError:  # "//" alone: an empty host
        expected = None
    assert join(base, href) == expected


_HREF_CHARS = st.sampled_from(
    [*"/.?#%aZ0-_~:@ \\\u00e9'|", "..", "../", "./", "%41", "%2e", "%zz", "%c3%a9", "//x.demo"]
)


@HYPOTHESIS
@given(_BASES, st.lists(_HREF_CHARS, max_size=12).map("".join))
def test_join_shortcut_matches_canonicalize(base: str, href: str) -> None:
    # The "#f" base is not canonical, so join() canonicalises the concatenation instead of
    # taking its shortcut; both must agree, and the result must be canonical.
    result = join(base, href)
    assert result == join(base + "#f", href)
    if result is not None:
        assert canonicalize(result) == result


# ----------------------------------------------------------------------------- host keys


@pytest.mark.parametrize(
    ("url", "expected_origin", "expected_host"),
    [
        ("http://a.demo/x/y?z", "http://a.demo", "a.demo"),
        ("http://a.demo:8080/", "http://a.demo:8080", "a.demo"),
        ("https://[::1]:8443/x", "https://[::1]:8443", "::1"),
        ("https://[::1]/x", "https://[::1]", "::1"),
        ("http://a.demo", "http://a.demo", "a.demo"),
    ],
)
def test_origin_and_host_of(url: str, expected_origin: str, expected_host: str) -> None:
    assert origin(url) == expected_origin
    assert host_of(url) == expected_host
    assert host_of(expected_origin) == expected_host


def test_origin_rejects_relative() -> None:
    with pytest.raises(ValueError, match="absolute"):
        origin("/x")


def test_host_of_bare_host() -> None:
    assert host_of("a.demo:81") == "a.demo"


# ----------------------------------------------------------------------------- digest


def test_url_digest_is_host_hash_then_url_hash() -> None:
    url = "http://a.demo/x"
    digest = url_digest(url)
    assert len(digest) == 16
    assert digest[:4] == host_hash("a.demo")
    assert digest[4:] == hashlib.blake2b(url.encode(), digest_size=12).digest()
    assert url_digest("http://a.demo/y") != digest


def test_url_digests_of_one_host_share_a_prefix() -> None:
    a = [url_digest(f"http://a.demo/{i}") for i in range(50)]
    assert len(set(a)) == 50
    assert {d[:4] for d in a} == {host_hash("a.demo")}
    # the host, not the origin: http, https and other ports land together (one partition)
    for other in ("https://a.demo/0", "http://a.demo:8080/0"):
        assert url_digest(other)[:4] == a[0][:4]
        assert url_digest(other) != a[0]
    assert url_digest("http://b.demo/0")[:4] != a[0][:4]
    assert url_digest("http://[::1]:81/x")[:4] == host_hash("::1")


def test_digest_partition() -> None:
    parts = [digest_partition(url_digest(f"http://h{i}.demo/p"), 7) for i in range(700)]
    assert set(parts) == set(range(7))
    assert max(parts.count(p) for p in range(7)) < 160  # about 100 each
    same_host = {digest_partition(url_digest(f"http://h1.demo/{i}"), 7) for i in range(50)}
    assert len(same_host) == 1


def test_url_digest_host_cache_is_bounded() -> None:
    for i in range(urls._HOST_HASHES_MAX + 10):
        url_digest(f"http://h{i}.demo/")
    assert urls._HOST_HASHES_MAX // 2 <= len(urls._host_hashes) <= urls._HOST_HASHES_MAX
    assert "http://h0.demo" not in urls._host_hashes  # the older half went
    assert f"http://h{urls._HOST_HASHES_MAX + 9}.demo" in urls._host_hashes
    assert url_digest("http://h3.demo/")[:4] == host_hash("h3.demo")


def test_canonical_origin_cache_is_bounded_and_keeps_the_newer_half() -> None:
    limit = urls._CANONICAL_ORIGINS_MAX
    for i in range(limit + 10):
        assert canonicalize(f"http://c{i}.demo/x") == f"http://c{i}.demo/x"
    assert limit // 2 <= len(urls._canonical_origins) <= limit
    assert f"http://c{limit + 9}.demo" in urls._canonical_origins
    assert canonicalize("HTTP://C1.demo/x") == "http://c1.demo/x"  # evicted: slow path, same


def test_url_digest_is_stable_across_processes() -> None:
    code = (
        "from frontier_crawl.frontier.urls import url_digest; print(url_digest('http://a/').hex())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip() == url_digest("http://a/").hex()
