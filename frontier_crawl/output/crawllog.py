"""The crawl log: one JSON object per line for every URL the engine finishes with.

Entries are encoded with msgspec into a buffer and written in whole lines with one
``write()`` on an ``O_APPEND`` file, so lines never interleave or tear even if several
processes share the file. ``flush()`` hands the buffer to the OS (enough to survive a kill of
the process); ``sync()`` also ``fdatasync``s it (enough to survive an OS crash or power cut):
the engine calls one of them before each commit that depends on the lines. A write that fails
(a full disk) raises ``OSError`` naming the file. U+2028, U+2029 and U+0085, legal raw in
JSON, are escaped so that even ``str.splitlines()`` sees one entry per line. Strings that
cannot be UTF-8 (lone surrogates from undecodable input) are written with backslash escapes
rather than failing the crawl.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import msgspec

from frontier_crawl.output.fsync import fsync_directory
from frontier_crawl.safefs import make_dir, open_append

_FLUSH_BYTES = 1 << 16
# U+0085, U+2028, U+2029 in UTF-8. These byte sequences only ever occur inside JSON strings.
_LINE_BREAKS = (
    (b"\xc2\x85", b"\\u0085"),
    (b"\xe2\x80\xa8", b"\\u2028"),
    (b"\xe2\x80\xa9", b"\\u2029"),
)


class LogEntry(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One finished URL. ``time`` is ISO 8601 UTC with milliseconds (see :func:`iso_time`)."""

    time: str
    url: str
    status: int  #: HTTP status, 0 when no response
    outcome: str  #: an :class:`~frontier_crawl.output.outcomes.Outcome` value
    error: str | None  #: error kind ("timeout", "dns-error"...), None on success
    bytes: int  #: payload bytes received
    duration_s: float  #: request start to response end
    depth: int  #: links followed from a seed (seeds are 0)
    referrer: str | None  #: page the URL was found on; None for seeds
    content_type: str  #: response Content-Type, "" when none
    #: seconds this URL's responses held its host beyond the politeness delay, all attempts
    #: (a 429/503 Retry-After, the host backoff); 0 for nearly every URL
    held_s: float = 0.0
    #: a revisit (``[recrawl]``): how many visits of the URL came before this one (1 for the
    #: first revisit). A first fetch has none: UNSET, and 0 is taken as UNSET, so its line
    #: has no ``visit`` key (lines without recrawl are as they always were)
    visit: int | msgspec.UnsetType = msgspec.UNSET
    #: the request's method when it is not a GET (a spider's form POST); a GET's line has no
    #: ``method`` key ("GET" is taken as UNSET), so lines are as they always were
    method: str | msgspec.UnsetType = msgspec.UNSET
    #: what the outcome and error kind do not say, on the few lines that need it: the
    #: exception of a ``parse-error`` ("ValueError: ... (at file.py:LINE in function)"), the
    #: detail of an ``other-error`` failure (a request header libcurl refused); else no key
    message: str | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        if self.visit == 0:
            msgspec.structs.force_setattr(self, "visit", msgspec.UNSET)
        if self.method == "GET":
            msgspec.structs.force_setattr(self, "method", msgspec.UNSET)


class ProblemEntry(LogEntry, frozen=True, kw_only=True, gc=False):
    """A spider's problem with a page (outcome ``callback-error``, ``pipeline-error``...): the
    page's URL, status and depth, the exception's type in ``error``, and ``message`` (``"KeyError:
    'from'"``) and ``where`` (``"docs_spider.py:12 in DocsSpider.parse_page"``)."""

    message: str
    where: str


def iso_time(epoch_s: float) -> str:
    """``2024-05-01T12:00:00.123Z`` for a ``time.time()`` value (milliseconds truncated).

    The ``strftime`` of the date and time is cached for the last second asked for: a log
    written many lines a second formats it once a second, not once a line.
    """
    global _last_second
    seconds, ms = divmod(math.floor(epoch_s * 1000), 1000)
    second, prefix = _last_second
    if seconds != second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _last_second = (seconds, prefix)
    return f"{prefix}.{ms:03d}Z"


_last_second: tuple[int, str] = (-1, "")  #: (epoch second, its formatted date and time)


class CrawlLog:
    """Appends :class:`LogEntry` lines to ``path`` (created with its parent directory)."""

    name = "crawl-log"  #: its name on the output protocol (``protocol.py``)

    def __init__(
        self, path: Path, flush_bytes: int = _FLUSH_BYTES, *, durable: bool = False
    ) -> None:
        """``durable``: ``prepare_commit`` fdatasyncs (``output.durability = "power-loss"``);
        otherwise it only hands the lines to the OS."""
        make_dir(path.parent)
        self._durable = durable
        self._handed = 0  #: bytes handed to the OS by this writer
        self.path = path
        created = not path.exists()
        self._fd: int | None = open_append(path)  # never through a symbolic link
        if created:  # the new name itself must survive a power cut, not only the lines
            fsync_directory(path.parent)
        self._flush_bytes = flush_bytes
        self._buffer = bytearray()
        self._encoder = msgspec.json.Encoder()
        self._unsynced = False  #: lines written since the last sync()

    def write(self, entry: LogEntry) -> None:
        """Buffer one line; written out once the buffer passes ``flush_bytes``."""
        if self._fd is None:
            raise ValueError("write to a closed CrawlLog")
        start = len(self._buffer)
        try:
            self._encoder.encode_into(entry, self._buffer, -1)
        except UnicodeEncodeError:
            del self._buffer[start:]
            self._encoder.encode_into(_escaped(entry), self._buffer, -1)
        self._buffer += b"\n"
        if len(self._buffer) >= self._flush_bytes:
            self.flush()

    def flush(self) -> None:
        """Write the buffered lines to the file (one write call per flush when possible)."""
        data = memoryview(_line_safe(bytes(self._buffer)))
        self._buffer.clear()
        try:
            while data and self._fd is not None:
                n = os.write(self._fd, data)
                data = data[n:]
                self._handed += n
                self._unsynced = True
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def sync(self) -> None:
        """Flush, then ``fdatasync`` the file if anything was written since the last sync."""
        self.flush()
        if self._unsynced and self._fd is not None:
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
            self._unsynced = False

    # the output protocol (protocol.py): no commit point, a kill may leave a duplicate line
    def prepare_commit(self, upto: int | None = None) -> None:
        """Before a commit: every line written so far handed over (fdatasynced if durable)."""
        del upto
        if self._durable:
            self.sync()
        else:
            self.flush()

    def durable(self) -> int:
        """Bytes this writer handed to the OS (not waiting: the loop writes them itself)."""
        return self._handed

    def commit_point(self) -> bytes | None:
        return None

    def discard(self) -> None:
        """Close without writing the buffered lines (after a failed write: their pages were
        not committed and are fetched again). Idempotent."""
        self._buffer.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        """Flush and close. Idempotent."""
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _line_safe(data: bytes) -> bytes:
    """Escape the code points JSON leaves raw but ``str.splitlines`` breaks lines at."""
    for raw, escaped in _LINE_BREAKS:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def _escaped(entry: LogEntry) -> LogEntry:
    """``entry`` with every string made UTF-8-safe by backslash-escaping surrogates."""
    changes = {
        name: value.encode("utf-8", "backslashreplace").decode("utf-8")
        for name in entry.__struct_fields__
        if isinstance(value := getattr(entry, name), str)
    }
    return msgspec.structs.replace(entry, **changes)
