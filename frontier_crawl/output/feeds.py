"""Feeds: the items of a spider's pages, appended to JSON Lines or CSV files, exactly once.

A feed is an output on the protocol of ``protocol.py``. The engine appends a page's items
only when it marks the page done (in the same group commit), the feed hands its bytes to the
OS (fdatasynced with ``output.durability = "power-loss"``) before that commit, and the commit
records the feed's byte offset (its ``commit_point``) in the same LMDB transaction. So the
first ``offset`` bytes of a feed are exactly the items of the pages marked done: at start-up
(:func:`open_feed`) the file is cut back to its committed offset, which drops the items of
pages a kill left unfinished (those pages are fetched again and yield them again). Every item
of a page therefore appears once, whatever the number of kills and restarts.

A feed is never overwritten: a restart appends to it. What start-up does with the file:

* no committed offset (a new crawl state) and no file, or an empty one: a new feed.
* no committed offset but a non-empty file (another crawl's feed, or this crawl's after its
  state directory was set aside): the file is set aside (renamed ``<name>.damaged-<time>``,
  never deleted) and a new feed begins, so the new one holds each item once.
* a committed offset: the file is cut back to it. A file shorter than it, one whose byte
  before the offset is not a line end, one that cannot be read (or is no file): set aside,
  with a warning saying what it held, and a new feed begins (the items of pages committed
  before stay in the file set aside; they are not fetched again). A missing file: a warning,
  and a new feed.

Formats. ``jsonl``: one JSON object per line (U+2028, U+2029 and U+0085 escaped, so that
``str.splitlines`` sees one item per line). ``csv``: RFC 4180 (``\\r\\n`` row ends, quoted
when needed, so a value may hold line breaks), a header row first. The columns are ``fields``,
or, without it, the keys of the first item the feed receives; they are fixed by the header
row for the life of the file (a restart reads them back from it). With ``fields``, the header row
is written by the first commit even if no item has come yet, so a crawl whose pages yield no
item still leaves a CSV file with its header. A key that is not a column is
left out (logged once per key); a column the item lacks is an empty cell. Strings are written
as they are, ``None`` as an empty cell, ``true``/``false`` for booleans, numbers as Python
prints them, and lists and objects as their JSON text.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from frontier_crawl.output.fsync import fsync_directory
from frontier_crawl.output.recover import set_aside
from frontier_crawl.safefs import make_dir, open_append, open_existing, regular_file

log = logging.getLogger(__name__)

_U64_BYTES = 8
_LINE_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"),
                (b"\xe2\x80\xa9", b"\\u2029"))  # fmt: skip
_HEADER_MAX = 1 << 20  #: most bytes of a CSV header row read back at start-up


class _Unmovable(OSError):
    """A feed file that must be set aside could not be (the operator must move it)."""


def encode_offset(offset: int) -> bytes:
    return offset.to_bytes(_U64_BYTES, "big")


def decode_offset(blob: bytes | None) -> int | None:
    """The committed offset stored in a blob; None if none (or unreadable: treated as none)."""
    if blob is None or len(blob) != _U64_BYTES:
        return None
    return int.from_bytes(blob, "big")


class Feed:
    """One feed file (module docstring). Build it with :func:`open_feed`."""

    def __init__(
        self,
        path: Path,
        name: str,
        fmt: str,
        offset: int,
        columns: tuple[str, ...],
        *,
        durable: bool,
    ) -> None:
        self.path = path
        self._name = name
        self.format = fmt
        self._durable = durable
        self._fd: int | None = open_append(path)  # never through a symbolic link
        self._offset = offset  #: bytes handed to the OS (the file's length)
        self._buffer = bytearray()
        self._unsynced = False
        self._columns = columns  #: CSV: the columns (empty: the first item's keys)
        self._needs_header = fmt == "csv" and offset == 0  #: an empty CSV file: header first
        self._json = msgspec.json.Encoder()
        self._dropped: set[str] = set()  #: CSV keys left out (each logged once)
        self.items = 0  #: items appended by this run

    @property
    def name(self) -> str:
        return self._name

    @property
    def columns(self) -> tuple[str, ...]:
        return self._columns

    def append(self, items: Iterable[dict[str, Any]]) -> None:
        """Buffer items (handed over by the next ``prepare_commit``)."""
        if self._fd is None:
            raise ValueError(f"append to a closed feed {self.path}")
        if self.format == "jsonl":
            buffer, encode = self._buffer, self._json.encode_into
            for item in items:
                encode(item, buffer, -1)
                buffer += b"\n"
                self.items += 1
            return
        rows = io.StringIO()
        writer = csv.writer(rows)
        for item in items:
            if not self._columns:
                self._columns = tuple(str(k) for k in item)
            if self._needs_header:
                writer.writerow(self._columns)
                self._needs_header = False
            self._check_keys(item)
            writer.writerow([self._cell(item.get(c)) for c in self._columns])
            self.items += 1
        self._buffer += rows.getvalue().encode("utf-8", "backslashreplace")

    def _check_keys(self, item: dict[str, Any]) -> None:
        columns = self._columns
        for key in item:
            if key not in columns and key not in self._dropped:
                self._dropped.add(key)
                log.warning("%s: item key %r is not one of the CSV columns %s: left out",
                            self.path, key, list(columns))  # fmt: skip

    def _cell(self, value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        return self._json.encode(value).decode("utf-8", "backslashreplace")

    # the output protocol (protocol.py)
    def prepare_commit(self, upto: int | None = None) -> None:
        """Hand the buffered items to the OS (and fdatasync them, if durable)."""
        del upto
        if self._needs_header and self._columns:  # ``fields`` named, no item yet: the header
            self._buffer[:0] = _csv_row(self._columns)  # row is committed with the first commit
            self._needs_header = False  # (a crawl that yields nothing still leaves a CSV file)
        data = bytes(self._buffer)
        self._buffer.clear()
        if self.format == "jsonl":
            for raw, escaped in _LINE_BREAKS:
                if raw in data:
                    data = data.replace(raw, escaped)
        view = memoryview(data)
        try:
            while view and self._fd is not None:
                n = os.write(self._fd, view)
                view = view[n:]
                self._offset += n
                self._unsynced = True
            if self._durable and self._unsynced and self._fd is not None:
                os.fdatasync(self._fd)
                self._unsynced = False
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def durable(self) -> int:
        return self._offset

    def commit_point(self) -> bytes | None:
        return encode_offset(self._offset)

    def discard(self) -> None:
        self._buffer.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            try:
                self.prepare_commit()
            finally:
                os.close(self._fd)
                self._fd = None


def _csv_row(cells: tuple[str, ...]) -> bytes:
    row = io.StringIO()
    csv.writer(row).writerow(cells)
    return row.getvalue().encode("utf-8", "backslashreplace")


def open_feed(
    path: Path,
    name: str,
    fmt: str,
    fields: tuple[str, ...],
    committed: int | None,
    *,
    durable: bool,
) -> tuple[Feed, list[str]]:
    """The feed at ``path`` cut back to its ``committed`` offset (module docstring), and the
    warnings of what start-up did to it. Never raises for a damaged file (it is set aside);
    an OSError only if a new file cannot be created there either."""
    warnings: list[str] = []
    make_dir(path.parent)
    offset, columns = 0, fields
    try:
        offset, columns = _recover(path, fmt, fields, committed, warnings)
    except _Unmovable:
        raise
    except OSError as exc:
        _set_aside(path, f"cannot be read or repaired ({exc})", committed, warnings)
        offset, columns = 0, fields
    created = not path.exists()
    feed = Feed(path, name, fmt, offset, columns if offset else fields, durable=durable)
    if created:
        fsync_directory(path.parent)
    return feed, warnings


def _recover(
    path: Path, fmt: str, fields: tuple[str, ...], committed: int | None, warnings: list[str]
) -> tuple[int, tuple[str, ...]]:
    """(offset, columns) to continue ``path`` at; sets it aside if it cannot be continued."""
    if not path.exists() and not path.is_symlink():
        if committed:
            _warn(warnings, f"{path}: missing, though the crawl committed {committed} bytes of "
                  "items to it: a new feed begins; the items of pages committed before are not "
                  "in it (those pages are not fetched again).")  # fmt: skip
        return 0, fields
    size = regular_file(path).st_size  # a symbolic link or a directory: set aside
    if committed is None:
        if size:
            _set_aside(path, f"holds {size} bytes this crawl state has no record of (another "
                       "crawl's feed, or this one's before its state was set aside)", None,
                       warnings)  # fmt: skip
        return 0, fields
    if size < committed:
        _set_aside(path, f"{size} bytes, shorter than the {committed} the crawl committed",
                   committed, warnings)  # fmt: skip
        return 0, fields
    with os.fdopen(open_existing(path, writable=True), "r+b") as fh:
        if committed:
            fh.seek(committed - 1)
            if fh.read(1) != b"\n":
                problem = f"byte {committed - 1} is not the end of a line"
            else:
                problem = ""
            if problem:
                fh.close()
                _set_aside(path, problem + " (not what a killed crawl leaves)", committed,
                           warnings)  # fmt: skip
                return 0, fields
        if size > committed:
            fh.truncate(committed)
            os.fsync(fh.fileno())
            log.warning("%s: cut %d bytes of items of pages not committed (they are fetched "
                        "again)", path, size - committed)  # fmt: skip
        columns = fields
        if fmt == "csv" and committed:
            fh.seek(0)
            head = fh.read(min(committed, _HEADER_MAX))
            columns = _header(head)
            if not columns:
                fh.close()
                _set_aside(path, "its first line is not a CSV header row", committed, warnings)
                return 0, fields
            if fields and columns != fields:
                _warn(warnings, f"{path}: its columns are {list(columns)}, output.feeds fields "
                      f"are {list(fields)}: the file's columns are kept (give the feed a new "
                      "path for the new columns).")  # fmt: skip
    return committed, columns


def _header(head: bytes) -> tuple[str, ...]:
    """The columns of a CSV file's first row (empty if unreadable)."""
    try:
        text = head.decode("utf-8")
        row = next(csv.reader(io.StringIO(text)), None)
    except (UnicodeDecodeError, csv.Error):
        return ()
    return tuple(row) if row else ()


def _set_aside(path: Path, why: str, committed: int | None, warnings: list[str]) -> None:
    consequence = (
        "A new feed begins now; the items of pages committed before are in the file set "
        "aside (they are not fetched again)." if committed else "A new feed begins now."
    )
    try:
        moved = set_aside(path)
    except OSError as exc:
        message = (f"{path}: {why}; it could not be set aside ({exc}): move it out of the "
                   f"way by hand and start the crawl again.")  # fmt: skip
        _warn(warnings, message)
        raise _Unmovable(exc.errno, message) from None
    _warn(warnings, f"{path}: {why}; set aside as {moved.name}. {consequence}")


def _warn(warnings: list[str], message: str) -> None:
    log.warning("%s", message)
    warnings.append(message)
