"""Sitemaps (sitemaps.org protocol 0.9): the URLs a site lists, read with bounded work.

:func:`parse_sitemap` reads one fetched sitemap body and returns a :class:`Sitemap`: its kind
(``urlset``, ``sitemapindex`` or a text file of one URL per line), its entries (``<loc>`` and
``<lastmod>`` as epoch seconds, or None), and the problem that stopped the reading, if one did.
It never raises on what a server sends, never reads a file or the network, and its work is
bounded by :class:`SitemapLimits` whatever the input:

* **gzip** is recognised by its magic bytes (``1f 8b``), never by the name or the
  Content-Type (servers label ``.xml.gz`` files every way), and decompressed in chunks with
  ``zlib`` (concatenated members too, up to :data:`MAX_GZIP_MEMBERS`): past ``max_bytes`` of
  output (a gzip bomb) the reading stops with problem ``too-large``, having expanded at most
  ``max_bytes`` plus one chunk.
* **XML** goes to lxml's parser (libxml2) as it is decompressed, fed in chunks, with a
  parser *target* (SAX-like callbacks): no tree is built, so memory holds one entry's text,
  not the document. The parser never resolves entities (``resolve_entities=False``), never
  loads a DTD or anything over the network (``load_dtd=False``, ``no_network=True``) and
  keeps libxml2's limits on text and depth (``huge_tree=False``). On top of that a document
  with a DOCTYPE is refused (problem ``dtd``): a sitemap has no use for one, and every
  entity trick (billion laughs, external entities naming ``file:///etc/passwd``, parameter
  entities) needs one. Malformed XML and encoding errors stop the reading (``bad-xml``;
  strict parsing, as the protocol requires escaped URLs: libxml2's recovery mode drops
  entries silently instead). The encoding is the XML declaration's (UTF-8 by default).
* **Limits**: at most ``max_urls`` entries (the protocol's 50,000, ``<url>`` elements with a
  usable ``<loc>`` or not; one more is ``too-many-urls``); at most
  :data:`ELEMENTS_PER_ENTRY` times ``max_urls`` XML elements of any kind (``too-large``: a
  small file of millions of empty elements costs CPU, not bytes); a ``<loc>`` longer than
  :data:`MAX_LOC` is skipped unread; markup (a tag and its attributes, a comment) longer
  than :data:`MAX_MARKUP` is ``too-large`` before libxml2 sees it; a body the fetcher cut
  at ``max_bytes`` (``truncated``) is ``too-large``. Entries read before any problem are
  kept: each came from a complete element.
* **Text sitemaps** (``text``): a body whose first byte (after a UTF-8 byte order mark and
  white space) is not ``<``: one URL per line, UTF-8; lines that are not an absolute http(s)
  URL are skipped; none at all is ``not-a-sitemap``.

Namespaces are not checked (the local names ``urlset``, ``sitemapindex``, ``url``,
``sitemap``, ``loc``, ``lastmod`` are; old and missing namespaces are common). ``<loc>``
values that are not absolute http(s) URLs are skipped; scope, canonical form, the seen-set and
robots.txt are the frontier's business. RSS/Atom feeds, which the protocol also accepts, and
``xhtml:link`` alternates are not read.

``<lastmod>`` (:func:`w3c_datetime`): the W3C Datetime profile of ISO 8601 (``YYYY``,
``YYYY-MM``, ``YYYY-MM-DD``, ``YYYY-MM-DDThh:mm[:ss[.s]]TZD``, TZD ``Z`` or ``+hh:mm``); a time
without a zone is taken as UTC; anything else (or an impossible date) is None, ignored.

A sitemap URL is queued with callback :data:`SITEMAP_CALLBACK` (defined in the config leaf so
that the frontier, which queues them, need not import this subsystem) and ``meta``
:func:`level_meta`: b"" for one found in robots.txt or ``[sitemaps] paths``, else one byte, its
nesting level under sitemap indexes (:func:`meta_level`).
"""

from __future__ import annotations

import calendar
import itertools
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from frontier_crawl.config.settings import SITEMAP_CALLBACK, SITEMAP_MAX_BYTES, SITEMAP_MAX_URLS

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings

__all__ = [
    "SITEMAP_CALLBACK",
    "Entry",
    "Kind",
    "Problem",
    "Sitemap",
    "SitemapLimits",
    "level_meta",
    "meta_level",
    "parse_sitemap",
    "w3c_datetime",
]

#: bytes decompressed (and fed to the XML parser) per step
CHUNK = 256 * 1024
#: XML elements read per ``max_urls`` (an entry and its children: loc, lastmod, changefreq,
#: priority, a few extensions); past it the document is too large, however few bytes it has
ELEMENTS_PER_ENTRY = 16
#: the longest ``<loc>`` (or ``<lastmod>``) text kept; longer ones are no URL
MAX_LOC = 64 * 1024
_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
#: a text sitemap's line (stripped): one absolute http(s) URL
_URL_LINE = re.compile(rb"https?://[^\s\x00]+", re.IGNORECASE)
#: the longest markup (a tag with its attributes, a comment, a CDATA section, the DOCTYPE)
#: fed to libxml2: a tag of millions of attributes costs it gigabytes (2,000,000 empty
#: attributes in 23 MB: 488 MB and 7 s), and no sitemap has one beyond a few hundred bytes
MAX_MARKUP = 64 * 1024
#: a run of MAX_MARKUP bytes without ``>`` that starts where the window or a ``>`` does
#: (tried at run starts only, so the search scans each byte once: see _long_markup)
_LONG_RUN = re.compile(rb"(?:^|(?<=>))[^>]{%d}" % MAX_MARKUP)
#: gzip members read from one body (concatenated members are rare in sitemaps)
MAX_GZIP_MEMBERS = 64
#: a text sitemap's longest line considered (longer ones are no URL)
MAX_LINE = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_HTTP = ("http://", "https://")


class Kind(StrEnum):
    """What a sitemap body turned out to be."""

    URLSET = "urlset"  #: pages (``<url><loc>``)
    INDEX = "sitemapindex"  #: other sitemaps (``<sitemap><loc>``)
    TEXT = "text"  #: one URL per line


class Problem(StrEnum):
    """Why the reading of a sitemap stopped early (entries before it are kept)."""

    TOO_LARGE = "too-large"  #: past max_bytes after decompression, or cut by the fetcher
    TOO_MANY_URLS = "too-many-urls"  #: more than max_urls entries
    BAD_GZIP = "bad-gzip"  #: gzip magic, but a damaged or truncated stream
    DTD = "dtd"  #: a DOCTYPE (entities, external references): refused before its use
    BAD_XML = "bad-xml"  #: not well-formed, or not in its declared encoding
    NOT_A_SITEMAP = "not-a-sitemap"  #: XML of another root element, or no URL in a text body


class Entry(tuple[str, float | None]):
    """One ``<loc>`` and its ``<lastmod>`` (epoch seconds, None if absent or unreadable)."""

    __slots__ = ()

    @property
    def loc(self) -> str:
        return self[0]

    @property
    def lastmod(self) -> float | None:
        return self[1]


@dataclass(slots=True, frozen=True)
class Sitemap:
    """What one sitemap body held. ``kind`` None: nothing recognisable (``problem`` says why).
    ``read_bytes``: bytes read, after decompression."""

    kind: Kind | None
    entries: list[Entry]
    problem: Problem | None
    read_bytes: int


@dataclass(slots=True, frozen=True)
class SitemapLimits:
    """The bounds of one sitemap's reading (``[sitemaps]``)."""

    max_bytes: int = SITEMAP_MAX_BYTES
    max_urls: int = SITEMAP_MAX_URLS
    text: bool = True

    @classmethod
    def from_settings(cls, settings: CrawlSettings) -> SitemapLimits:
        s = settings.sitemaps
        return cls(max_bytes=s.max_bytes, max_urls=s.max_urls, text=s.text)


def level_meta(level: int) -> bytes:
    """The ``meta`` a sitemap URL at nesting ``level`` is queued with (0: b"")."""
    return bytes((min(level, 255),)) if level > 0 else b""


def meta_level(meta: bytes) -> int:
    """The nesting level of a sitemap ticket, from its ``meta`` (:func:`level_meta`)."""
    return meta[0] if len(meta) == 1 else 0


# ----------------------------------------------------------------------------- lastmod

_W3C = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})"
    r"(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?)?)?)?"
)


def w3c_datetime(text: str) -> float | None:
    """A W3C Datetime (``<lastmod>``) as epoch seconds; None if it is not one."""
    text = text.strip()
    if len(text) > 10 and text[10:11] in "Tt" and text[-1:] in "Zz0123456789":
        try:  # the common full form, in C (3.11 reads "Z" and fractions of any length)
            when = datetime.fromisoformat(text)
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    m = _W3C.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, zone = m.groups()
    try:
        parts = (
            int(year), int(month or 1), int(day or 1),
            int(hour or 0), int(minute or 0), int(second or 0),
        )  # fmt: skip
        if not (parts[0] >= 1 and 1 <= parts[1] <= 12  # (year 0: no date of Python's)
                and 1 <= parts[2] <= calendar.monthrange(parts[0], parts[1])[1]
                and parts[3] < 24 and parts[4] < 60 and parts[5] < 61):  # fmt: skip
            return None
    except ValueError:
        return None
    offset = 0
    if zone and zone not in "Zz":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            return None
        offset = sign * (hours * 3600 + minutes * 60)
    return float(calendar.timegm((*parts, 0, 0, 0)) - offset)


# ----------------------------------------------------------------------------- bytes


class _Stop(Exception):
    """The reading stops here, for this reason."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.value)
        self.problem = problem


class _Bytes:
    """The body's bytes, decompressed if it is gzip, at most ``limit`` of them: an iterator
    of chunks that raises :class:`_Stop` past the limit or on a damaged gzip stream."""

    def __init__(self, body: bytes, limit: int) -> None:
        self._body = body
        self._limit = limit
        self.read = 0

    def __iter__(self) -> Iterator[bytes]:
        body = self._body
        if body[:2] != _GZIP_MAGIC:
            for start in range(0, len(body), CHUNK):
                yield self._count(body[start : start + CHUNK])
            return
        yield from self._gunzip()

    def _gunzip(self) -> Iterator[bytes]:
        """The gzip members' output. Input is handed to zlib CHUNK bytes at a time (slices of
        a memoryview, so a long body is never copied whole), output taken at most CHUNK (and
        never more than one byte past the limit) at a time; at most MAX_GZIP_MEMBERS members
        (RFC 1952 allows concatenated ones: a body of millions of empty members would
        otherwise cost a decompressor each for no output)."""
        view = memoryview(self._body)
        size, pos, members = len(view), 0, 0
        pending: bytes | memoryview = b""
        while True:  # one member per round
            members += 1
            if members > MAX_GZIP_MEMBERS:
                raise _Stop(Problem.BAD_GZIP)
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            try:
                while not d.eof:
                    if not pending:
                        if pos >= size:
                            raise _Stop(Problem.BAD_GZIP)  # the body ends inside a member
                        pending = view[pos : pos + CHUNK]
                        pos += len(pending)
                    out = d.decompress(pending, min(CHUNK, self._limit - self.read + 1))
                    pending = d.unconsumed_tail
                    if out:
                        yield self._count(out)
            except zlib.error:
                raise _Stop(Problem.BAD_GZIP) from None
            pending = d.unused_data  # (what followed the member in the last piece given)
            if len(pending) < 2 and pos < size:
                pending += bytes(view[pos : pos + CHUNK])
                pos = min(size, pos + CHUNK)
            if pending[:2] != _GZIP_MAGIC:
                return  # the end; trailing garbage after a member is ignored, as gzip(1) does

    def _count(self, chunk: bytes) -> bytes:
        self.read += len(chunk)
        if self.read > self._limit:
            raise _Stop(Problem.TOO_LARGE)
        return chunk


# ----------------------------------------------------------------------------- parsing


def parse_sitemap(
    body: bytes, limits: SitemapLimits = SitemapLimits(), *, truncated: bool = False
) -> Sitemap:
    """Read one sitemap body (see the module docstring). ``truncated``: the fetcher cut the
    body at ``limits.max_bytes``; what it holds is read and the problem is ``too-large``."""
    source = _Bytes(body, limits.max_bytes)
    chunks = iter(source)
    reading = _Reading(limits.max_urls)
    try:
        head, first = b"", True
        for chunk in chunks:  # the first chunk that is not blank (a UTF-8 BOM dropped)
            head = (chunk.removeprefix(_BOM) if first else chunk).lstrip()
            first = False
            if head:
                break
        start = head[:1]
        if start == b"<":
            _read_xml(head, chunks, reading)
        elif start and limits.text:
            reading.kind = Kind.TEXT
            _read_text(head, chunks, reading)
            if not reading.entries:
                raise _Stop(Problem.NOT_A_SITEMAP)
        else:  # empty, or not XML while text sitemaps are off
            raise _Stop(Problem.NOT_A_SITEMAP)
    except _Stop as stop:
        reading.problem = stop.problem
        if stop.problem in _NOTHING:
            reading.kind = None
            reading.entries.clear()
    if truncated and reading.problem in (None, Problem.BAD_XML, Problem.BAD_GZIP):
        reading.problem = Problem.TOO_LARGE  # (the cut is why it ends badly)
    return Sitemap(reading.kind, reading.entries, reading.problem, source.read)


#: problems that make a body no sitemap at all (nothing of it is used)
_NOTHING = frozenset({Problem.DTD, Problem.NOT_A_SITEMAP})


class _Reading:
    """What has been read of one sitemap so far."""

    __slots__ = ("entries", "kind", "lines", "max_urls", "problem")

    def __init__(self, max_urls: int) -> None:
        self.lines = 0  #: text lines with "://" that were no URL
        self.entries: list[Entry] = []
        self.max_urls = max_urls
        self.kind: Kind | None = None
        self.problem: Problem | None = None

    def add(self, loc: str, lastmod: float | None) -> None:
        if len(self.entries) >= self.max_urls:
            raise _Stop(Problem.TOO_MANY_URLS)
        self.entries.append(Entry((loc, lastmod)))


def _local(tag: object) -> str:
    """An element's local name (``{namespace}name`` -> ``name``)."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


_KINDS = {"urlset": (Kind.URLSET, "url"), "sitemapindex": (Kind.INDEX, "sitemap")}


class _Target:
    """lxml's parser target (SAX-like: no tree is built, so memory stays flat whatever the
    document): entries from the root's children, ``loc`` and ``lastmod`` from theirs."""

    __slots__ = ("depth", "elements", "entries_seen", "entry", "field", "lastmod", "loc",
                 "max_elements", "reading", "text", "text_len")  # fmt: skip

    def __init__(self, reading: _Reading) -> None:
        self.reading = reading
        self.depth = 0
        self.elements = 0
        self.max_elements = reading.max_urls * ELEMENTS_PER_ENTRY
        self.entries_seen = 0
        self.entry = ""  #: the local name of an entry ("url" or "sitemap"), once known
        self.field = ""  #: "loc" or "lastmod" while inside one (of an entry)
        self.loc: str | None = None
        self.lastmod: str | None = None
        self.text: list[str] = []
        self.text_len = 0

    def doctype(self, *_args: object) -> None:
        raise _Stop(Problem.DTD)

    def start(self, tag: object, _attrib: object) -> None:
        self.depth += 1
        self.elements += 1
        if self.elements > self.max_elements:
            raise _Stop(Problem.TOO_LARGE)
        depth = self.depth
        if depth == 3:
            name = _local(tag)
            if name == "loc" or name == "lastmod":
                self.field = name
                self.text.clear()
                self.text_len = 0
        elif depth == 2:
            self.loc = self.lastmod = None
            if _local(tag) == self.entry:
                self.entries_seen += 1  # with a loc or not: the protocol's count
                if self.entries_seen > self.reading.max_urls:
                    raise _Stop(Problem.TOO_MANY_URLS)
        elif depth == 1:
            known = _KINDS.get(_local(tag))
            if known is None:
                raise _Stop(Problem.NOT_A_SITEMAP)
            self.reading.kind, self.entry = known

    def data(self, text: str) -> None:
        if self.field and self.depth == 3:
            self.text_len += len(text)
            if self.text_len <= MAX_LOC:  # longer: no URL, and never held
                self.text.append(text)

    def end(self, tag: object) -> None:
        depth = self.depth
        self.depth -= 1
        if depth == 3 and self.field:
            value = "".join(self.text).strip() if self.text_len <= MAX_LOC else ""
            if self.field == "loc":
                self.loc = value if self.loc is None else self.loc
            elif self.lastmod is None:
                self.lastmod = value
            self.field = ""
        elif depth == 2 and _local(tag) == self.entry:
            loc = self.loc
            if loc and loc[:8].lower().startswith(_HTTP):
                lastmod = w3c_datetime(self.lastmod) if self.lastmod else None
                self.reading.add(loc, lastmod)

    def close(self) -> None:
        return None


class _MarkupGuard:
    """Refuses XML whose markup runs past MAX_MARKUP bytes without a ``>`` (across chunks:
    the unfinished markup at the end of one is checked with the next)."""

    __slots__ = ("doctype", "tail")

    def __init__(self) -> None:
        self.tail = b""  #: an unfinished "<..." at the end of the last chunk (< MAX_MARKUP)
        self.doctype = False  #: a "<!DOCTYPE" was fed (what libxml2's refusal is about)

    def check(self, chunk: bytes) -> tuple[bytes, bool]:
        """The part of ``chunk`` that may be fed, and whether the markup ran too long there
        (the reading stops after that part: entries before it are kept)."""
        tail = self.tail
        window = tail + chunk if tail else chunk
        if not self.doctype and _DOCTYPE.search(window) is not None:
            self.doctype = True
        long = _long_markup(window)
        if long >= 0:
            return chunk[: max(0, long - len(tail))], True
        opened = window.rfind(b"<")
        self.tail = window[opened:] if opened > window.rfind(b">") else b""
        return chunk, False


def _long_markup(window: bytes) -> int:
    """Where the first ``<`` of ``window`` followed by MAX_MARKUP bytes without a ``>``
    is, or -1. Linear in the window: a ``<`` that qualifies lies in a run of MAX_MARKUP or
    more bytes without ``>``, and the first ``<`` of such a run is the one to check (it has
    the most room after it). A regular expression ``<[^>]{MAX_MARKUP}`` would rescan the run
    from every ``<`` in it: quadratic in comments or CDATA sections full of ``<``."""
    pos = 0
    while (run := _LONG_RUN.search(window, pos)) is not None:
        end = window.find(b">", run.end())
        end = len(window) if end < 0 else end
        opened = window.find(b"<", run.start(), end - MAX_MARKUP)
        if opened >= 0:
            return opened
        pos = end
    return -1


def _read_xml(head: bytes, rest: Iterator[bytes], reading: _Reading) -> None:
    """Feed the XML to lxml's parser chunk by chunk; entries appended as they end."""
    from lxml import etree  # ~20 ms: imported by the crawls that read a sitemap, not by all

    parser = etree.XMLParser(
        target=_Target(reading),
        resolve_entities=False,
        load_dtd=False,
        dtd_validation=False,
        no_network=True,
        huge_tree=False,
        recover=False,
    )
    guard = _MarkupGuard()
    try:
        for chunk in itertools.chain((head,), rest):
            safe, too_long = guard.check(chunk)
            parser.feed(safe)
            if too_long:
                raise _Stop(Problem.TOO_LARGE)
        parser.close()
    except etree.XMLSyntaxError:
        if reading.kind is None and guard.doctype:
            raise _Stop(Problem.DTD) from None  # libxml2 refused its entity declarations
        raise _Stop(Problem.BAD_XML) from None


def _read_text(head: bytes, rest: Iterator[bytes], reading: _Reading) -> None:
    """One URL per line (``_text_lines``); a partial last line of a chunk waits for the
    next."""
    pending = head
    for chunk in rest:
        window = pending + chunk
        cut = window.rfind(b"\n") + 1
        _text_lines(window[:cut], reading)
        pending = window[cut:]
        if len(pending) > MAX_LINE:  # no URL: kept short, so that a body without line
            pending = b"\x00"  # breaks costs linear time (the NUL spoils the line)
    _text_lines(pending, reading)


def _text_lines(block: bytes, reading: _Reading) -> None:
    """The URLs of ``block`` (whole lines): only a line holding ``://`` is looked at, found
    by ``bytes.find`` (memchr speed: blank and garbage lines cost no Python); past max_urls
    such lines that are no URL, the file is ``too-large``."""
    pos, budget = 0, reading.max_urls
    while (hit := block.find(b"://", pos)) >= 0:
        start = block.rfind(b"\n", 0, hit) + 1
        end = block.find(b"\n", hit)
        end = len(block) if end < 0 else end
        pos = end + 1
        line = block[start:end].strip()
        try:
            url = line.decode("utf-8") if _URL_LINE.fullmatch(line) is not None else ""
        except UnicodeDecodeError:
            url = ""
        if url:
            reading.add(url, None)
            continue
        reading.lines += 1
        if reading.lines > budget:
            raise _Stop(Problem.TOO_LARGE)
