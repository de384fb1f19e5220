"""An HTTP cache on disk (diskcache) that makes recrawls conditional.

It is a *revalidation* cache, not a freshness cache: every request still goes to the server.
A stored response only makes the next request for its URL conditional (``If-None-Match`` from
its ``ETag``, ``If-Modified-Since`` from its ``Last-Modified``), and a ``304 Not Modified``
answer is turned back into the stored response (:meth:`HttpCache.revalidated`), marked with
:class:`~frontier_crawl.fetch.types.NotModified` so that the archive can write a revisit record
pointing at the capture that holds the payload, and the crawl can still follow the page's links.

What is stored, keyed by the request URL: final ``200`` responses that completed without error,
carry at least one validator and no ``Cache-Control: no-store``, for requests whose redirects
libcurl did not follow (robots.txt requests have their own cache in the frontier; a followed
chain's validators belong to its last URL). A 304 leaves the entry as it is, so its
``fetched_at`` keeps naming the capture with the payload; a new 200 replaces it.

Values are msgpack-encoded :class:`Stored` records (raw body as on the wire, still
content-encoded, decoded again on a hit with the same cap as a fresh body), in a data-only
diskcache (:func:`frontier_crawl.safefs.open_cache`: a row that is not bytes, a pickle say, is
a miss, never unpickled). The cache directory
is bounded by ``size_limit`` (diskcache evicts the least recently stored entries), may be
shared by successive crawls, and is safe to delete at any time.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import sqlite3
from pathlib import Path

import diskcache
import msgspec

from frontier_crawl.fetch.decode import DecodedTooLarge, DecodeError, decoder_for
from frontier_crawl.fetch.transfer import parse_header_block
from frontier_crawl.fetch.types import ErrorKind, FetchResult, NotModified
from frontier_crawl.safefs import open_cache

__all__ = ["CACHE_ERRORS", "CacheUnusable", "HttpCache", "Stored"]

log = logging.getLogger(__name__)

#: what a broken cache (disk full, a locked or corrupt SQLite file) raises: logged, never fatal
CACHE_ERRORS = (OSError, sqlite3.Error, diskcache.Timeout)
#: headers of a 304 that never update the stored ones (they describe the 304 message itself)
_NOT_UPDATED = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


def _disk_errno(exc: BaseException) -> int | None:
    """The errno if ``exc`` says the disk is full, failing or read-only (rather than the file
    damaged), else None."""
    if isinstance(exc, OSError):
        trouble = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS)
        return exc.errno if exc.errno in trouble else None
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return None
    if code & 0xFF == sqlite3.SQLITE_FULL:
        return errno.ENOSPC
    return errno.EIO if code & 0xFF in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY) else None


class CacheUnusable(Exception):
    """The cache directory cannot be opened (a truncated or corrupt SQLite file...): the caller
    sets it aside (the cache is safe to delete) and opens a fresh one."""

    def __init__(self, directory: Path, problem: str) -> None:
        super().__init__(f"{directory}: {problem}")
        self.path = directory
        self.problem = problem


class Stored(msgspec.Struct, frozen=True, gc=False):
    """One stored 200 response."""

    url: str  #: the URL it was fetched from (the key)
    fetched_at: float  #: wall clock of the fetch (WARC-Date of its response record)
    header_bytes: bytes  #: response header block as received
    raw_body: bytes  #: body as on the wire after de-chunking
    etag: str | None
    last_modified: str | None

    def conditional_headers(self) -> tuple[tuple[str, str], ...]:
        """The request headers that ask the server whether this response is still current."""
        headers: list[tuple[str, str]] = []
        if self.etag:
            headers.append(("If-None-Match", self.etag))
        if self.last_modified:
            headers.append(("If-Modified-Since", self.last_modified))
        return tuple(headers)


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Stored)


class HttpCache:
    """Stored responses under ``directory``, at most ``max_bytes`` on disk."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        try:
            self._cache = open_cache(directory, size_limit=max_bytes)
            self._cache.get("")  # a read, so a damaged SQLite file shows itself now
        except CACHE_ERRORS as exc:
            number = _disk_errno(exc)
            if number is not None:  # a full or failing disk: the cache is not damaged
                raise OSError(number, f"{directory}: the HTTP cache: {exc}") from exc
            raise CacheUnusable(directory, f"the HTTP cache cannot be opened ({exc})") from exc
        self.stored = 0  #: responses stored by this process
        self.hits = 0  #: 304 answers turned into stored responses

    def lookup(self, url: str) -> Stored | None:
        """The stored response for ``url``, or None (also for an unreadable entry)."""
        value = self._cache.get(url)
        if not isinstance(value, bytes):
            return None
        try:
            return _DECODER.decode(value)
        except msgspec.DecodeError:
            log.warning("unreadable HTTP cache entry for %s: ignored", url)
            return None

    def store(self, result: FetchResult) -> bool:
        """Keep ``result`` if it is a storable 200 (see the module docstring)."""
        if (
            result.error is not None
            or result.status != 200
            or result.not_modified is not None
        ):
            return False
        etag, last_modified = result.validator("etag"), result.validator("last-modified")
        if not (etag or last_modified) or _no_store(result.header("cache-control")):
            return False
        stored = Stored(
            url=result.request.url,
            fetched_at=result.started_at,
            header_bytes=result.header_bytes,
            raw_body=result.raw_body,
            etag=etag,
            last_modified=last_modified,
        )
        self._cache.set(result.request.url, _ENCODER.encode(stored))
        self.stored += 1
        return True

    def revalidated(self, result: FetchResult, stored: Stored, max_body_bytes: int) -> FetchResult:
        """The 304 ``result`` carrying the ``stored`` response it confirmed.

        If the stored body no longer fits ``max_body_bytes`` (the setting changed since), or
        cannot be decoded, the result is an error (TOO_LARGE / PROTOCOL) with status 304.
        """
        stored_headers = parse_header_block(stored.header_bytes.splitlines(keepends=True))
        fresh = {name for name, _ in result.headers if name not in _NOT_UPDATED}
        headers = tuple(h for h in stored_headers if h[0] not in fresh) + tuple(
            h for h in result.headers if h[0] in fresh
        )
        try:
            body = _decode(headers, stored.raw_body, max_body_bytes)
        except DecodedTooLarge as exc:
            return dataclasses.replace(result, error=ErrorKind.TOO_LARGE, error_detail=str(exc))
        except DecodeError as exc:
            return dataclasses.replace(result, error=ErrorKind.PROTOCOL, error_detail=str(exc))
        self.hits += 1
        return dataclasses.replace(
            result,
            headers=headers,
            raw_body=stored.raw_body,
            body=body,
            not_modified=NotModified(stored.url, stored.fetched_at),
        )

    def close(self) -> None:
        """Close the SQLite connection (entries stay on disk)."""
        self._cache.close()


def _decode(headers: tuple[tuple[str, str], ...], raw: bytes, limit: int) -> bytes:
    """The stored body decoded as a fresh one would be (same cap)."""
    codings = [value for name, value in headers if name == "content-encoding"]
    decoder = decoder_for(", ".join(codings), limit) if codings else None
    if decoder is None:
        if len(raw) > limit:
            raise DecodedTooLarge(f"stored body exceeds {limit} bytes")
        return raw
    decoder.feed(raw)
    return decoder.finish()


def _no_store(cache_control: str | None) -> bool:
    """Whether a Cache-Control value has the ``no-store`` directive."""
    if not cache_control:
        return False
    return any(d.strip().split("=", 1)[0].lower() == "no-store" for d in cache_control.split(","))
