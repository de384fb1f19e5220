"""Resolve an href against a document's base URL: ``urllib.parse.urljoin`` semantics, fast.

An href is first cleaned as the WHATWG URL parser does (leading and trailing C0 controls and
spaces stripped, every tab, CR and LF removed) and its fragment dropped. It is then resolved:

* **Fast paths** for the shapes that make up nearly all links: absolute ``http(s)://host/p``,
  root-relative ``/p`` and relative ``p/q`` are a few ``str.find`` calls and one concatenation
  (``urljoin`` costs about ten times more); ``../p`` and other dot segments use a copy of
  urljoin's own merge (:func:`_merge_path`) on the base pre-split once per page. A fast path
  only accepts hrefs for which it returns exactly what ``urljoin`` returns
  (tests/unit/test_links.py checks this with hypothesis); whatever could make them differ
  takes the slow path: ``;`` parameters, an empty ``?`` query, a query-only or
  scheme-relative (``//host``) href, a colon before the query, a non-ASCII or bracketed host
  (which ``urlsplit`` validates). Before them, one regular-expression match recognises the
  same three shapes when the href is already clean (nothing to strip or drop: the usual
  case) and answers without the cleaning and the ``find`` calls (:func:`_as_it_stands`).
* **Drop path**: an href with a scheme other than http(s) (``javascript:``, ``mailto:``,
  ``data:``...) can only resolve to that scheme, so it is dropped without calling urljoin.
* **Slow path**: ``urljoin`` itself; the ``ValueError`` it raises for a broken IPv6 literal
  such as ``http://[::1/`` means "skip this link".

Only ``http`` and ``https`` results with a non-empty host are kept, their scheme lower-cased.
Anything else URL-shaped (host case, percent-encoding, default ports) is left to the
frontier's canonicaliser: this module reproduces ``urljoin`` and does not normalise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlparse, urlsplit

#: Resolved URLs longer than this are dropped (no server or archive handles them well).
MAX_URL_CHARS = 8192

_C0_OR_SPACE = "".join(chr(code) for code in range(0x21))
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
_HTTP_SCHEMES = frozenset(("http", "https"))
_LOWER_PREFIXES = ("http://", "https://")
_HTTP_PREFIXES = (*_LOWER_PREFIXES, "HTTP://", "HTTPS://", "Http://", "Https://")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+\-.]*):")  # what urlsplit takes for a scheme
# An absolute href that resolve() returns unchanged: nothing for clean_href to strip, remove
# or drop (no C0 control or space, no "#"), a lower-case http(s) scheme, a non-empty ASCII
# host without brackets, no ";" before the query, no bare "?" at the end. Exactly what the
# absolute fast path (_absolute) accepts and returns as is, in one C-level match.
_CLEAN_ABSOLUTE = re.compile(
    r"https?://[^/?#;\[\]\x00-\x20\x80-\U0010ffff]+(?:/[^?#;\x00-\x20]*)?(?:\?[^#\x00-\x20]+)?"
)
# The root-relative and relative hrefs that _fast answers by concatenation, as they stand (the
# "/." and "//" checks follow the match, over the whole href: stricter than _fast, so safe).
_CLEAN_ROOTED = re.compile(r"/(?!/)[^?#;\x00-\x20]*(?:\?[^#\x00-\x20]+)?")
_CLEAN_RELATIVE = re.compile(r"[^/?#;:.\x00-\x20][^?#;:\x00-\x20]*(?:\?[^#\x00-\x20]+)?")
# A cleaned base URL that urlparse would split into (lower-case http(s) scheme, this netloc,
# this path, no params): origin, netloc and path. Brackets, userinfo, a backslash, ";" and a
# non-ASCII netloc (checked after) take urlparse itself.
_PLAIN_BASE = re.compile(r"(https?://([^/?#;@\[\]\\]+))(/[^?#;]*|)(?:\?|$)")


@dataclass(slots=True, frozen=True)
class Base:
    """A document base URL, pre-split once per page for the fast paths.

    ``url`` is the cleaned, fragment-free base handed to ``urljoin`` ("" when it cannot be
    parsed). For an http(s) base, ``origin`` is ``scheme://host``, ``segments`` the directory
    segments urljoin merges relative paths into, and ``directory`` the origin plus the path up
    to its last ``/`` when plain concatenation equals urljoin's result (no ``/.`` or ``//`` in
    the base path). Empty strings and tuples disable the corresponding fast path.
    """

    url: str
    origin: str = ""
    directory: str = ""
    segments: tuple[str, ...] = ()

    @classmethod
    def of(cls, url: str) -> Base:
        """Split ``url`` (a page URL or a resolved ``<base href>``)."""
        url = clean_href(url)
        plain_url = _PLAIN_BASE.match(url)
        if plain_url is not None and plain_url[2].isascii():  # a page URL: nearly always
            origin, path = plain_url.group(1, 3)
        else:
            try:
                parts = urlparse(url)  # as urljoin splits it: ";params" leave the last segment
            except ValueError:
                return cls("")
            if parts.scheme not in _HTTP_SCHEMES or not parts.netloc:
                return cls(url)
            origin = f"{parts.scheme}://{parts.netloc}"
            path = parts.path
        segments = path.split("/")
        if segments[-1]:
            del segments[-1]
        plain = "/." not in path and "//" not in path
        directory = origin + path[: path.rfind("/") + 1] if path else origin + "/"
        return cls(url, origin, directory if plain else "", tuple(segments))


def clean_href(href: str) -> str:
    """Strip C0 controls and spaces at both ends, remove tab/CR/LF, drop the fragment."""
    href = href.strip(_C0_OR_SPACE)
    if "\t" in href or "\n" in href or "\r" in href:
        href = href.translate(_TAB_OR_NEWLINE)
    hash_at = href.find("#")
    return href if hash_at < 0 else href[:hash_at]


def resolve(base: Base, href: str) -> str | None:
    """Absolute http(s) URL for ``href`` on a page with ``base``, or None to skip the link."""
    url = _as_it_stands(base, href)
    if url is None:
        href = clean_href(href)
        url = _fast(base, href) if href else None
        if url is None:
            url = _slow(base, href)
    if url is None or len(url) > MAX_URL_CHARS:
        return None
    return url


def _as_it_stands(base: Base, href: str) -> str | None:
    """The commonest shapes, already clean, in one regular-expression match: an absolute URL
    returned unchanged, a root-relative or relative path appended to the origin or directory.
    None when ``href`` is anything else (:func:`_fast` and :func:`_slow` decide)."""
    if _CLEAN_ABSOLUTE.fullmatch(href) is not None:
        return href
    if href[:1] == "/":
        if base.origin and _CLEAN_ROOTED.fullmatch(href) is not None and "/." not in href:
            return base.origin + href
    elif (
        base.directory
        and _CLEAN_RELATIVE.fullmatch(href) is not None
        and "/." not in href
        and "//" not in href
    ):
        return base.directory + href
    return None


def _fast(base: Base, href: str) -> str | None:
    """The urljoin result when ``href`` has a common shape, None to take the slow path.

    Plain ``str.find`` calls rather than a regular expression: about twice as fast here.
    """
    path_end = href.find("?")
    if path_end < 0:
        path_end = len(href)
    elif path_end == len(href) - 1:  # a bare "?", which urljoin drops
        return None
    if href.find(";", 0, path_end) >= 0:
        return None
    if href.startswith(_HTTP_PREFIXES):
        return _absolute(href, path_end)
    if not base.origin or href[0] == "?" or href.startswith("//"):
        return None
    path = href[:path_end]
    if href[0] == "/":
        if "/." not in path:
            return base.origin + href
        return base.origin + _merge_path(None, path) + href[path_end:]
    if ":" in path:  # perhaps a scheme
        return None
    if base.directory and href[0] != "." and "/." not in path and "//" not in path:
        return base.directory + href
    return base.origin + _merge_path(base.segments, path) + href[path_end:]


def _merge_path(base_segments: tuple[str, ...] | None, path: str) -> str:
    """urljoin's path merge and dot-segment removal (CPython 3.11), quirks included.

    ``base_segments`` is None for an absolute ``path``. Relative paths collapse empty
    segments, as urljoin does (``a//b`` becomes ``a/b``).
    """
    if base_segments is None:
        segments = path.split("/")
    else:
        segments = [*base_segments, *path.split("/")]
        segments[1:-1] = filter(None, segments[1:-1])
    resolved: list[str] = []
    for segment in segments:
        if segment == "..":
            if resolved:
                resolved.pop()
        elif segment != ".":
            resolved.append(segment)
    if segments[-1] in (".", ".."):
        resolved.append("")
    merged = "/".join(resolved) or "/"
    return merged if merged.startswith("/") else "/" + merged


def _absolute(href: str, path_end: int) -> str | None:
    """``href`` with a lower-case scheme when urlsplit would accept its host unchanged."""
    start = 7 if href[4] == ":" else 8  # past "http://" or "https://", in any case
    host_end = href.find("/", start, path_end)
    host = href[start : path_end if host_end < 0 else host_end]
    if not host or not host.isascii() or "[" in host or "]" in host:
        return None
    if href.startswith(_LOWER_PREFIXES):  # nearly always: no copy
        return href
    return href[:start].lower() + href[start:]


def _slow(base: Base, href: str) -> str | None:
    """Resolve with urljoin; None when it raises or the result is not http(s)."""
    scheme = _SCHEME.match(href)
    if scheme is not None and scheme[1].lower() not in _HTTP_SCHEMES:
        return None
    try:
        if not base.url:  # urljoin returns href unparsed: validate it ourselves
            urlsplit(href)
        joined = urljoin(base.url, href)
    except ValueError:
        return None
    return _http_only(joined)


def _http_only(url: str) -> str | None:
    """``url`` with its scheme lower-cased if it is http(s) with a host, else None."""
    scheme, _, rest = url.partition(":")
    scheme = scheme.lower()
    if scheme not in _HTTP_SCHEMES or not rest.startswith("//") or rest[2:3] in ("", "/", "?"):
        return None
    return f"{scheme}:{rest}"
