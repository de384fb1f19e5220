"""URL canonicalisation, joining, host keys and URL digests.

``canonicalize(url)`` returns the one spelling of a crawlable URL that the frontier dedupes,
queues and fetches, or ``None`` when the URL is not crawlable. A URL is read as browsers read
it: by the WHATWG URL Standard's parser (Ada, through ``can_ada``), and our rules on top:

1. The scheme must be ``http`` or ``https`` (any case). Everything the WHATWG parser does for
   these "special" schemes applies: surrounding C0 controls and spaces stripped, tab, CR and
   LF removed anywhere, ``\\`` read as ``/`` before the query (``http:\\\\h\\a`` is
   ``http://h/a``), a missing ``//`` supplied (``http:h/a``), the host percent-decoded and put
   through IDNA UTS-46 non-transitional processing (``faß.de`` is ``xn--fa-hia.de``, not
   ``fass.de``), IPv4 in any of its forms written as a dotted quad (``0x7f.1`` is
   ``127.0.0.1``), IPv6 compressed, a default port dropped, ``.`` / ``..`` segments (also
   ``%2e``) resolved, and characters outside its percent-encode sets encoded as UTF-8.
2. Userinfo (``user:password@``) is dropped: a crawler must not send credentials it found in a
   link, and dropping them merges duplicates. The fragment is dropped.
3. The host, after IDNA, loses one trailing dot and must be a DNS name of labels
   ``[a-z0-9_-]{1,63}`` (253 characters at most; ``xn--`` labels must decode as punycode), a
   dotted-quad IPv4 address or a bracketed IPv6 address. Port 0 is refused.
4. Path and query are percent-normalised: escapes of unreserved characters
   (``A-Z a-z 0-9 - . _ ~``) are decoded, other escapes get upper-case hex digits, a ``%`` that
   does not start an escape becomes ``%25``, and every character that is neither unreserved
   nor reserved (``/?#[]@!$&'()*+,;=:``; ``?`` only in the query) is percent-encoded: what the
   WHATWG parser leaves as is, such as ``|``, ``^``, or ``\\`` in the query. (The WHATWG
   parser already encodes ``'`` in the query of http(s) URLs as ``%27``.) An empty query (a
   bare ``?``) is dropped; an empty path is ``/``.
5. A result longer than ``MAX_URL_LENGTH`` (8192) characters is ``None``.

The result is ASCII and a fixed point: ``canonicalize(canonicalize(u)) == canonicalize(u)``.

Digests: ``url_digest`` is the 16-byte key of a canonical URL in the seen-set and (by its first
4 bytes, a hash of the host) the worker partition.

Cost: an already-canonical URL (lower-case scheme and host, allowed characters only, no dot
segments, no escape that would change) is recognised by one regular expression and a set of
known canonical origins, and returned as is. The general case is one ``can_ada.parse`` (about
0.4 us) plus our rules; host checks are cached (bounded). ``join`` resolves the relative
references ``/path``, ``path``, ``?q``, ``#f`` and ``//host`` itself against a memoised base
when the WHATWG parser would only concatenate; other references go through ``can_ada``.
"""

from __future__ import annotations

import hashlib
import re
from itertools import islice
from typing import Any, NamedTuple

import can_ada

__all__ = [
    "MAX_URL_LENGTH",
    "canonical_host",
    "canonicalize",
    "canonicalize_with_origin",
    "digest_partition",
    "host_hash",
    "host_of",
    "join",
    "origin",
    "origin_digest",
    "url_digest",
]

MAX_URL_LENGTH = 8192
"""Longest canonical URL accepted, in characters."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_C0_OR_SPACE = "".join(chr(i) for i in range(0x21))
_HOST_CACHE_MAX = 65_536

_UNRESERVED = "A-Za-z0-9\\-._~"
_PATH_OK = _UNRESERVED + "!$&'()*+,;=:@/\\[\\]"
_QUERY_OK = _PATH_OK + "?"
# What the fast paths accept in a query: no "'", which the WHATWG parser encodes there.
_FAST_QUERY_OK = _UNRESERVED + "!$&()*+,;=:@/\\[\\]?"

# The shape of a canonical URL and of a relative reference that keeps one canonical: only
# allowed characters, a non-empty query. What it cannot see (a non-canonical authority, dot
# segments, escapes to fix, the length) is checked after it.
_FAST_RE = re.compile(
    rf"(https?://[a-z0-9._-]+(?::[0-9]{{1,5}})?)/[{_PATH_OK}%]*(?:\?[{_FAST_QUERY_OK}%]+)?"
)
_FAST_HREF_RE = re.compile(rf"[{_PATH_OK}%]*(?:\?[{_FAST_QUERY_OK}%]+)?")
# An escape that is malformed, has lower-case hex digits or encodes an unreserved character.
_ESCAPE_TO_FIX_RE = re.compile(
    r"%(?![0-9A-F]{2})|%(?:2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE])"
)
_PATH_TO_FIX_RE = re.compile(f"[^{_PATH_OK}]")
_QUERY_TO_FIX_RE = re.compile(f"[^{_QUERY_OK}]")
_PATH_FIX_RE = re.compile(f"%[0-9A-Fa-f]{{2}}|%|[^{_PATH_OK}%]+")
_QUERY_FIX_RE = re.compile(f"%[0-9A-Fa-f]{{2}}|%|[^{_QUERY_OK}%]+")
_HOST_RE = re.compile(r"[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*")
_IPV4_PART_RE = re.compile(r"0|[1-9][0-9]{0,2}")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_BASE_RE = re.compile(r"(https?):(//[^/?#\\]*)([^?#\\]*)")
_CANONICAL_ORIGINS_MAX = 65_536

_PCT = [f"%{b:02X}" for b in range(256)]
_UNRESERVED_ESCAPES = {
    f"%{ord(c):02X}": c
    for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
}

# WHATWG host (as can_ada serialises it) -> canonical host, or None when not crawlable.
_host_cache: dict[str, str | None] = {}
# Origin -> host_hash(host of the origin), for url_digest.
_host_hashes: dict[str, bytes] = {}
_HOST_HASHES_MAX = 65_536
# Origins ("scheme://netloc") known to be canonical (a dict: insertion order for eviction).
_canonical_origins: dict[str, None] = {}


class _Base(NamedTuple):
    """A base URL split for ``join``."""

    url: str
    scheme: str
    origin: str  # scheme://authority
    path: str
    directory: str  # origin + path up to its last "/"
    canonical: bool  # canonicalize(url) == url


# The last base given to join().
_last_base: _Base | None = None


def _evict_older_half(cache: dict[str, Any]) -> None:
    """Drop the older half of a bounded cache (dicts keep insertion order): with hosts met in
    no particular order a full cache then still answers about half of them, where clearing it
    would answer none until it refilled."""
    for key in list(islice(cache, len(cache) // 2)):
        del cache[key]


def canonicalize(url: str) -> str | None:
    """Return the canonical form of ``url``, or ``None`` if it is not a crawlable URL."""
    match = _FAST_RE.fullmatch(url)
    if (
        match is not None
        and "/." not in url
        and len(url) <= MAX_URL_LENGTH
        and _is_canonical_origin(match.group(1))
        and _escapes_ok(url)
    ):
        return url
    return _canonicalize_slow(url)


def canonicalize_with_origin(url: str) -> tuple[str, str] | None:
    """``(canonicalize(url), origin of it)``, or ``None`` if ``url`` is not crawlable: the
    fast path's match already holds the origin (admission needs both for every link)."""
    match = _FAST_RE.fullmatch(url)
    if (
        match is not None
        and "/." not in url
        and len(url) <= MAX_URL_LENGTH
        and _is_canonical_origin(host_key := match.group(1))
        and _escapes_ok(url)
    ):
        return url, host_key
    canonical = _canonicalize_slow(url)
    return None if canonical is None else (canonical, origin(canonical))


def canonical_host(host: str) -> str | None:
    """The canonical form of a bare host name or address (``München.DE.`` ->
    ``xn--mnchen-3ya.de``, ``[::1]`` -> ``::1``) as :func:`host_of` returns it for the URLs
    of that host, or ``None`` when no crawlable URL has that host."""
    bracketed = host.startswith("[")
    if bracketed and not host.endswith("]"):
        return None
    if not host or (not bracketed and any(c in host for c in "/?#@\\:")):
        return None
    url = canonicalize(f"http://{host}/")
    return None if url is None else host_of(url)


def join(base: str, href: str) -> str | None:
    """Resolve ``href`` against ``base`` as the WHATWG URL parser does, then canonicalise it."""
    href = _clean(href)
    if href.startswith(("http://", "https://")):
        return canonicalize(href)
    parts = _base_parts(base)
    if parts is None or "\\" in href or (":" in href and _SCHEME_RE.match(href) is not None):
        return _join_slow(base, href)
    if href.startswith("//"):
        return canonicalize(parts.scheme + ":" + href)
    if not href or href.startswith("#"):
        return canonicalize(parts.url.partition("#")[0])
    if href.startswith("/"):
        joined = parts.origin + href
    elif href.startswith("?"):
        joined = parts.origin + parts.path + href
    else:
        joined = parts.directory + href
    if parts.canonical and _href_keeps_canonical(href):
        return joined if len(joined) <= MAX_URL_LENGTH else None
    return canonicalize(joined)


def origin(url: str) -> str:
    """Return ``scheme://host[:port]`` of a canonical URL: the politeness and robots key."""
    start = url.find("://")
    if start < 0:
        raise ValueError(f"not an absolute URL: {url!r}")
    end = url.find("/", start + 3)
    return url if end < 0 else url[:end]


def host_of(origin_or_url: str) -> str:
    """Return the bare host of a canonical origin or URL (IPv6 without brackets, no port)."""
    start = origin_or_url.find("://")
    start = 0 if start < 0 else start + 3
    end = origin_or_url.find("/", start)
    netloc = origin_or_url[start:] if end < 0 else origin_or_url[start:end]
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")]
    return netloc.partition(":")[0]


def port_of(origin_or_url: str) -> int | None:
    """The explicit port of a canonical origin or URL, None if it has none (its scheme's
    default: canonical URLs drop ``:80`` from http and ``:443`` from https)."""
    start = origin_or_url.find("://")
    start = 0 if start < 0 else start + 3
    end = origin_or_url.find("/", start)
    netloc = origin_or_url[start:] if end < 0 else origin_or_url[start:end]
    if netloc.startswith("["):
        netloc = netloc[netloc.find("]") + 1 :]
    _, colon, port = netloc.rpartition(":")
    return int(port) if colon and port.isdigit() else None


def url_digest(url: str) -> bytes:
    """Return the 16-byte digest of a canonical URL (stable across runs and processes).

    ``BLAKE2b-32(host) + BLAKE2b-96(url)``: the first 4 bytes depend on the host only
    (:func:`host_hash`), so the digests of one host sort together (the LMDB seen database,
    keyed by digest, then writes the links of one page to one or two pages instead of one
    page per link), and a worker partition by host is ``digest[:4]`` (:func:`digest_partition`).
    Two distinct URLs share a digest only if their 96-bit URL hashes collide: at most
    ``n**2 / 2**97`` for ``n`` URLs, 6e-12 at 10^9.
    """
    end = url.find("/", 8)  # past "https://x" or "http://x"
    key = url if end < 0 else url[:end]  # the origin of a canonical URL
    prefix = _host_hashes.get(key)
    if prefix is None:
        prefix = _new_host_hash(key)
    return prefix + hashlib.blake2b(url.encode("utf-8"), digest_size=12).digest()


def origin_digest(url: str, host_key: str) -> bytes:
    """``url_digest(url)`` of a canonical URL whose origin ``host_key`` the caller has."""
    prefix = _host_hashes.get(host_key)
    if prefix is None:
        prefix = _new_host_hash(host_key)
    return prefix + hashlib.blake2b(url.encode("utf-8"), digest_size=12).digest()


def _new_host_hash(origin: str) -> bytes:
    prefix = host_hash(host_of(origin))
    if len(_host_hashes) >= _HOST_HASHES_MAX:
        _evict_older_half(_host_hashes)
    _host_hashes[origin] = prefix
    return prefix


def host_hash(host: str) -> bytes:
    """The 4 bytes that start the digest of every URL of ``host`` (a bare host, no port)."""
    return hashlib.blake2b(host.encode("utf-8"), digest_size=4, person=b"fc-host").digest()


def digest_partition(digest: bytes, parts: int) -> int:
    """The partition (``0 .. parts-1``) of a URL digest: by host, stable across runs."""
    return int.from_bytes(digest[:4], "big") % parts


# --- canonicalisation -----------------------------------------------------------------------


def _escapes_ok(text: str) -> bool:
    """No malformed escape, lower-case hex digit or escaped unreserved character."""
    return "%" not in text or _ESCAPE_TO_FIX_RE.search(text) is None


def _is_canonical_origin(origin: str) -> bool:
    """Tell whether ``scheme://netloc`` is canonical (a set of known ones answers first)."""
    if origin in _canonical_origins:
        return True
    root = origin + "/"
    if _canonicalize_slow(root) != root:
        return False
    if len(_canonical_origins) >= _CANONICAL_ORIGINS_MAX:
        _evict_older_half(_canonical_origins)
    _canonical_origins[origin] = None
    return True


def _href_keeps_canonical(href: str) -> bool:
    """Is a canonical base joined with ``href`` (``/path``, ``?query`` or a relative path,
    by concatenation) canonical as it stands?"""
    return (
        _FAST_HREF_RE.fullmatch(href) is not None
        and not href.startswith(".")
        and "/." not in href
        and _escapes_ok(href)
    )


def _canonicalize_slow(url: str) -> str | None:
    """The general case of ``canonicalize``: the WHATWG parser, then our rules."""
    text = _clean(url)
    colon = text.find(":")
    scheme = text[:colon].lower()
    if scheme not in _DEFAULT_PORTS:
        return None
    try:
        parsed = can_ada.parse(text)
    except (ValueError, TypeError):  # not a URL; a lone surrogate (TypeError)
        return None
    port = parsed.port
    if port == "0":
        return None
    host = _canonical_whatwg_host(parsed.hostname)
    if host is None:
        return None
    path = _normalize(parsed.pathname, _PATH_TO_FIX_RE, _PATH_FIX_RE)
    result = f"{scheme}://{host}:{port}{path}" if port else f"{scheme}://{host}{path}"
    if "/." in path:
        result = result[: len(result) - len(path)] + _remove_dot_segments(path)
    query = parsed.search
    if len(query) > 1:
        result = f"{result}?{_normalize(query[1:], _QUERY_TO_FIX_RE, _QUERY_FIX_RE)}"
    return result if len(result) <= MAX_URL_LENGTH else None


def _clean(text: str) -> str:
    """Strip surrounding C0 controls and spaces; remove tab, CR and LF anywhere."""
    if text and (text[0] <= " " or text[-1] <= " "):
        text = text.strip(_C0_OR_SPACE)
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", "").replace("\n", "").replace("\r", "")
    return text


def _normalize(text: str, to_fix: re.Pattern[str], fix: re.Pattern[str]) -> str:
    """Percent-normalise a path or query (rule 4) of a WHATWG-serialised (ASCII) URL."""
    if to_fix.search(text) is None and "%" not in text:
        return text
    return fix.sub(_fix_run, text)


def _fix_run(match: re.Match[str]) -> str:
    """Replace one escape, lone ``%`` or run of characters that must be encoded."""
    text = match.group()
    if text[0] != "%":
        return "".join([_PCT[b] for b in text.encode("utf-8")])
    if len(text) == 1:
        return "%25"
    text = text.upper()
    return _UNRESERVED_ESCAPES.get(text, text)


def _remove_dot_segments(path: str) -> str:
    """Resolve ``.`` and ``..`` segments of an absolute path (the WHATWG parser has resolved
    them already; decoding ``%2E`` never makes new ones, so this is a safety net)."""
    segments = path.split("/")[1:]
    output: list[str] = []
    for segment in segments:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if segments[-1] in (".", ".."):
        output.append("")
    return "/" + "/".join(output)


# --- host -----------------------------------------------------------------------------------


def _canonical_whatwg_host(host: str) -> str | None:
    """Our host rules (rule 3) over a host as the WHATWG parser serialised it (cached)."""
    try:
        return _host_cache[host]
    except KeyError:
        pass
    result: str | None = host
    if not host.startswith("["):
        name = host[:-1] if host.endswith(".") else host
        valid = len(name) <= 253 and _HOST_RE.fullmatch(name) is not None
        result = name if valid and _labels_valid(name) else None
    if len(_host_cache) >= _HOST_CACHE_MAX:
        _evict_older_half(_host_cache)
    _host_cache[host] = result
    return result


def _labels_valid(host: str) -> bool:
    """Check punycode labels and that a numeric last label means a dotted-quad IPv4."""
    labels = host.split(".")
    if labels[-1].isdigit():
        return len(labels) == 4 and all(_ipv4_part_valid(label) for label in labels)
    if "xn--" not in host:
        return True
    return all(_punycode_valid(label) for label in labels if label.startswith("xn--"))


def _ipv4_part_valid(label: str) -> bool:
    """A decimal 0..255 without leading zeros."""
    return _IPV4_PART_RE.fullmatch(label) is not None and int(label) <= 255


def _punycode_valid(label: str) -> bool:
    """Tell whether an ``xn--`` label decodes as punycode."""
    try:
        label[4:].encode("ascii").decode("punycode")
    except UnicodeError:
        return False
    return True


# --- joining --------------------------------------------------------------------------------


def _base_parts(base: str) -> _Base | None:
    """Split an http(s) base URL for ``join``; the last one is memoised."""
    global _last_base
    parts = _last_base
    if parts is not None and parts.url == base:
        return parts
    match = _BASE_RE.fullmatch(base.partition("?")[0].partition("#")[0])
    if match is None:
        return None
    scheme, authority, path = match.group(1, 2, 3)
    origin = f"{scheme}:{authority}"
    directory = origin + (path[: path.rfind("/") + 1] or "/")
    parts = _Base(base, scheme, origin, path, directory, canonicalize(base) == base)
    _last_base = parts
    return parts


def _join_slow(base: str, href: str) -> str | None:
    """The WHATWG parser's resolution, then canonicalise; ``None`` if it refuses."""
    try:
        return canonicalize((can_ada.parse(base) + href).href)
    except (ValueError, TypeError):
        return None
