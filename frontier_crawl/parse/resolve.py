"""Resolve an href against a document's base URL as browsers do (WHATWG URL Standard), fast.

The parser is Ada (``can_ada``), which passes the web-platform-tests URL suite; the base is
parsed once per page and each href resolved against it (``base + href``, about 0.5 us). What
that means for http(s) links, among others: leading and trailing C0 controls and spaces are
stripped and every tab, CR and LF removed; ``\\`` is read as ``/`` before the query
(``..\\img\\a.html``); ``//host`` and ``http:path`` resolve as browsers resolve them; hosts go
through IDNA UTS-46 non-transitional processing (``faß.de`` is ``xn--fa-hia.de``); ``.`` and
``..`` segments (also ``%2e``) are resolved; characters outside the WHATWG percent-encode sets
are encoded as UTF-8, except in the query of a link on a page whose encoding is not UTF-8
(nor UTF-16): there non-ASCII characters are encoded in the page's encoding, a character that
encoding lacks as the HTML numeric reference ``%26%23<code point>%3B``, as browsers (and w3lib)
do: ``?q=привет`` on a windows-1251 page is ``?q=%EF%F0%E8%E2%E5%F2``. (Stateful encodings
such as ISO-2022-JP are encoded one run of characters at a time, which browsers do not.)

The fragment is dropped; only ``http`` and ``https`` results are kept (a ``javascript:``,
``mailto:`` or ``data:`` href, or a relative one on such a base, is skipped), at most
``MAX_URL_CHARS`` long. The frontier's canonicaliser then applies its own rules on top.

**Fast paths**, exactly the WHATWG result (tests/unit/test_links.py checks this against Ada
with hypothesis): one regular-expression match recognises an href that resolves by plain
concatenation, as nearly all links do, and answers without calling the parser: an absolute
``http(s)://host/path`` whose host is already in WHATWG form (lower-case ASCII labels, not
an IPv4 address, no ``xn--``, no port), a root-relative ``/path``, or a relative
``path/to/x``, each made of characters the parser leaves as they are, with no dot segment.
That shape depends on the href alone, so it is remembered for the hrefs met recently (bounded):
a site's navigation links, on every page, cost one dict lookup and a concatenation each.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from typing import NamedTuple

import can_ada

#: Resolved URLs longer than this are dropped (no server or archive handles them well).
MAX_URL_CHARS = 8192

_HTTP_PROTOCOLS = frozenset(("http:", "https:"))
_HTTP_PREFIXES = ("http://", "https://")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+\-.]*):")
# Characters the WHATWG parser leaves as they are in the path and the query of an http(s)
# URL (its path and special-query percent-encode sets, less "\", a "/" in the path).
_PATH = r"[A-Za-z0-9\-._~!$&'()*+,;=:@/\[\]%|^]"
_QUERY = r"[A-Za-z0-9\-._~!$&()*+,;=:@/?\[\]%|^]"
_TAIL = rf"{_PATH}*(?:\?{_QUERY}*)?"
# An absolute URL in WHATWG form: lower-case labels, the last one starting with a letter (so
# never read as an IPv4 address), no port, no userinfo.
_CLEAN_ABSOLUTE = re.compile(rf"https?://(?:[a-z0-9_-]+\.)*[a-z][a-z0-9_-]*/{_TAIL}")
_CLEAN_ROOTED = re.compile(rf"/(?![/\\]){_TAIL}")
# A relative path: no ":" in its first segment (else it may start with a scheme).
_CLEAN_RELATIVE = re.compile(
    rf"(?![./])[A-Za-z0-9\-._~!$&'()*+,;=@\[\]%|^]+(?:/{_PATH}*)?(?:\?{_QUERY}*)?"
)
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# ASCII bytes the special-query percent-encode set holds (C0, space, '"', '#', "'", '<', '>').
_QUERY_ENCODE = frozenset((*range(0x21), 0x22, 0x23, 0x27, 0x3C, 0x3E, 0x7F))
_PCT = [f"%{b:02X}" if b >= 0x80 or b in _QUERY_ENCODE else chr(b) for b in range(256)]
_UTF8_OUTPUT = frozenset(("utf-8", "utf-16-le", "utf-16-be", "utf-16"))


class Base(NamedTuple):
    """A document base URL, parsed once per page (a named tuple: built once per page, and a
    frozen dataclass's ``__init__`` costs four times as much).

    ``url`` is its WHATWG serialisation without the fragment ("" when it cannot be parsed);
    ``parsed`` the parsed URL (None then). For an http(s) base, ``origin`` is
    ``scheme://host[:port]`` and ``directory`` the URL up to the last ``/`` of its path: the
    fast paths append to them (empty strings disable them). ``encoding`` is the Python codec
    of the page for query strings, None for UTF-8.
    """

    url: str
    parsed: can_ada.URL | None = None
    origin: str = ""
    directory: str = ""
    encoding: str | None = None

    @classmethod
    def of(cls, url: str, encoding: str | None = None) -> Base:
        """Parse ``url`` (a page URL or a resolved ``<base href>``); ``encoding`` is the
        page's Python codec name (None, UTF-8 and UTF-16 all mean UTF-8)."""
        if encoding is not None and codecs.lookup(encoding).name in _UTF8_OUTPUT:
            encoding = None
        try:
            parsed = can_ada.parse(url)
        except (ValueError, TypeError):
            return cls("", None, encoding=encoding)
        href = _without_fragment(parsed.href)
        if not href.startswith(_HTTP_PREFIXES) or parsed.has_credentials():
            return cls(href, parsed, encoding=encoding)  # no fast paths (they drop userinfo)
        # An http(s) URL serialises as scheme://host[:port] (its origin), then its path (at
        # least "/"), then the query: the parts are cut from the string, not asked of Ada.
        path_at = href.index("/", href.index("//") + 2)
        query_at = href.find("?", path_at)
        directory = href[: href.rindex("/", path_at, query_at if query_at >= 0 else None) + 1]
        return cls(href, parsed, href[:path_at], directory, encoding)


def resolve(base: Base, href: str) -> str | None:
    """Absolute http(s) URL for ``href`` on a page with ``base``, or None to skip the link."""
    url = _as_it_stands(base, href)
    if url is None:
        url = _whatwg(base, href)
    if url is None or len(url) > MAX_URL_CHARS:
        return None
    return url


def resolve_all(base: Base, hrefs: Iterable[str]) -> list[str]:
    """:func:`resolve` of each of ``hrefs`` on one page, in order, the skipped ones left out.
    One loop for the page: an href whose shape is remembered (:func:`_as_it_stands`) costs a
    dict lookup and a concatenation, without a call."""
    out: list[str] = []
    append = out.append
    shapes = _shapes  # swapped for a new dict when it fills: this one stays right
    origin, directory = base.origin, base.directory
    for href in hrefs:
        shape = shapes.get(href)
        if shape is None:
            shape = _shape(href)
        if shape == _ABSOLUTE:
            url: str | None = href
        elif directory and shape != _OTHER:
            url = (origin if shape == _ROOTED else directory) + href
        else:
            url = _whatwg(base, href)
        if url is not None and len(url) <= MAX_URL_CHARS:
            append(url)
    return out


def _as_it_stands(base: Base, href: str) -> str | None:
    """The commonest shapes, already in WHATWG form: an absolute URL returned unchanged, a
    root-relative or relative path appended to the origin or directory. None when ``href`` is
    anything else (:func:`_whatwg` decides). The shape is a function of ``href`` alone
    (:func:`_shape`)."""
    shape = _shape(href)
    if shape == _ABSOLUTE:
        return href
    if shape == _OTHER or not base.directory:
        return None
    return (base.origin if shape == _ROOTED else base.directory) + href


def _shape(href: str) -> int:
    """The shape of ``href`` (:func:`_shape_of`), remembered: either generation answers, and
    an answer is kept in the young one."""
    shape = _shapes.get(href)
    if shape is None:
        shape = _shapes_old.get(href)
        if shape is None:
            shape = _shape_of(href)
        _remember(href, shape)
    return shape


#: What :func:`_shape_of` says of an href: not a fast-path shape, an absolute URL in WHATWG
#: form, a root-relative path, a relative path.
_OTHER, _ABSOLUTE, _ROOTED, _RELATIVE = range(4)
#: href -> its shape, for hrefs met recently (a site's navigation links recur on every page):
#: two generations of at most ``_SHAPES_MAX // 2`` hrefs of at most ``_SHAPE_HREF_MAX``
#: characters: at most 18 MB (tracemalloc, both full of 200-character hrefs), 9 MB for hrefs of
#: 60 characters. A young generation smaller than the hrefs a crawl keeps meeting costs more
#: than no memory at all (a miss is two lookups and an insert before the regular expression):
#: 32,768 hold the 20,000 of engine_null.py's pages, or 300 hosts' navigation of 100 links.
_SHAPES_MAX = 65_536
_SHAPE_HREF_MAX = 200
_shapes: dict[str, int] = {}
_shapes_old: dict[str, int] = {}


def _remember(href: str, shape: int) -> None:
    """Remember the shape of ``href`` in the young generation (aged when it is full)."""
    global _shapes, _shapes_old
    if len(href) > _SHAPE_HREF_MAX:
        return
    if len(_shapes) >= _SHAPES_MAX // 2:
        _shapes_old, _shapes = _shapes, {}
    _shapes[href] = shape


def _shape_of(href: str) -> int:
    """Which fast path ``href`` takes, by one regular-expression match."""
    first = href[:1]
    if first == "h" and _CLEAN_ABSOLUTE.fullmatch(href) is not None:
        if "xn--" in href:
            return _OTHER
        shape = _ABSOLUTE
    elif first == "/":
        if _CLEAN_ROOTED.fullmatch(href) is None:
            return _OTHER
        shape = _ROOTED
    elif _CLEAN_RELATIVE.fullmatch(href) is not None:
        shape = _RELATIVE
    else:
        return _OTHER
    if "/." in href or ("%2" in href and ("%2e" in href or "%2E" in href)):
        return _OTHER  # a dot segment, perhaps escaped (the WHATWG parser reads %2e as ".")
    return shape


def _whatwg(base: Base, href: str) -> str | None:
    """Resolve with the WHATWG parser; None when it fails or the result is not http(s)."""
    scheme = _SCHEME.match(href)
    if scheme is not None and scheme[1].lower() not in ("http", "https"):
        return None  # javascript:, mailto:, data:, ...: never an http(s) URL
    if base.encoding is not None and not href.isascii():
        href = _encode_query(href, base.encoding)
    try:
        url = can_ada.parse(href) if base.parsed is None else base.parsed + href
    except (ValueError, TypeError):  # not a URL; a lone surrogate (TypeError)
        return None
    if url.protocol not in _HTTP_PROTOCOLS:
        return None
    return _without_fragment(url.href)


def _without_fragment(href: str) -> str:
    """A serialised URL without its fragment (a ``#`` in it can only start the fragment)."""
    hash_at = href.find("#")
    return href if hash_at < 0 else href[:hash_at]


def _encode_query(href: str, encoding: str) -> str:
    """``href`` with the non-ASCII characters of its query percent-encoded in ``encoding``."""
    end = href.find("#")
    if end < 0:
        end = len(href)
    start = href.find("?", 0, end)
    if start < 0:
        return href
    query = href[start:end]
    if query.isascii():
        return href
    encoded = _NON_ASCII.sub(lambda run: _encode_run(run.group(), encoding), query)
    return href[:start] + encoded + href[end:]


def _encode_run(text: str, encoding: str) -> str:
    """Percent-encode a run of non-ASCII characters in ``encoding``; a character it lacks
    becomes ``%26%23<code point>%3B`` (the WHATWG URL Standard's "percent-encode after
    encoding")."""
    try:
        return "".join([_PCT[b] for b in text.encode(encoding)])
    except UnicodeEncodeError:
        pass
    out: list[str] = []
    for char in text:
        try:
            out += [_PCT[b] for b in char.encode(encoding)]
        except UnicodeEncodeError:
            out.append(f"%26%23{ord(char)}%3B")
    return "".join(out)


_HIGH_BYTES = re.compile(r"[\x80-\xff]")


def resolve_location(url: str, location: str) -> str | None:
    """The http(s) URL a ``Location`` header value sends the response for ``url`` to, or None.

    Header values reach us decoded as ISO-8859-1, one character per byte. A raw non-ASCII
    byte is percent-encoded as it is, as libcurl and browsers request it (``/caf\\xC3\\xA9``
    is ``/caf%C3%A9``), never encoded once more as UTF-8 (``/caf%C3%83%C2%A9``); the value
    is then resolved against ``url`` like a link on a UTF-8 page.
    """
    if not location.isascii():
        location = _HIGH_BYTES.sub(lambda byte: f"%{ord(byte.group()):02X}", location)
    return resolve(Base.of(url), location)
