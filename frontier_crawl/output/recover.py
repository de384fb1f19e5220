"""Start-up repair of outputs left by a process that was killed mid-write (or damaged since).

Nothing here raises: what cannot be repaired is set aside (:func:`set_aside`: renamed to
``<name>.damaged-<UTC time>``, never deleted) and described in a warning that names the file and
says what to do; the warnings go to the log and to the report's ``warnings``.

* A ``.warc.gz.open`` file is cut back to its last complete gzip member (each WARC record is its
  own member, and the inflater checks each member's CRC and length at its end), then renamed to
  its final name, so readers never see a truncated record. The records cut away belong to
  fetches whose completion never reached LMDB: they are fetched again. What a kill leaves after
  the last complete member is the start of one member (a valid gzip prefix): it is dropped.
  Anything else there (bytes that are no gzip, a bad CRC: not what a kill leaves) is copied to
  a ``.damaged-`` file beside it before the cut, so no byte is lost.
  Only the file's end is read (:func:`scan_gzip_tail`): a kill cuts a file only at its end (the
  writer appends, member after member), so the members before the last few MiB are taken as
  written; the scan starts at the first member that begins in that tail (found by its gzip
  magic and confirmed by inflating it whole) and checks every member from there on. A file of
  a GiB is recovered in the time of its tail, not of the whole file. Damage further back than
  the tail (not what a kill leaves) is not looked for.
  A file without one complete member was killed while its first record, the warcinfo, was being
  written (records are appended in order, so nothing of a fetch can follow an incomplete
  member): it holds no capture and is removed. One whose bytes are not a gzip prefix, or are
  more than any warcinfo record, was not written that way (another program's file, or disk
  damage): it is set aside. A file that cannot be read (or is no file) is set aside.
* ``crawl.jsonl`` is cut back to its last complete line, when what follows it looks like the
  start of one of our lines (a kill's leftover). If it does not, or the last lines are not JSON
  objects, or the file cannot be read, the whole log is set aside and a new one begins.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, cast

import msgspec
from isal import isal_zlib

from frontier_crawl.safefs import open_existing, regular_file

log = logging.getLogger(__name__)

_CHUNK = 1 << 20  #: bytes read at a time
#: the end of an unfinished WARC file that recovery reads (module docstring)
TAIL_BYTES = 4 << 20
_MAGIC = b"\x1f\x8b\x08"  #: a gzip member's first bytes (ID1, ID2, CM = deflate)
_OUT = 1 << 20  #: most bytes inflated per call (discarded)
_GZIP_WBITS = 16 + isal_zlib.MAX_WBITS
#: isal's stub declares ``error`` an instance; it is zlib.error's counterpart, a class
_INFLATE_ERROR = cast("type[Exception]", isal_zlib.error)
#: more than a compressed warcinfo record can take (ours are well under 1 KiB)
WARCINFO_MAX_BYTES = 16 << 10
_LOG_TAIL = 1 << 16  #: bytes of the crawl log's end read at start-up
_LINES_CHECKED = 64  #: complete lines at its end that must be JSON objects


def complete_gzip_prefix(path: Path) -> int:
    """Length of the longest prefix of ``path`` made of complete, valid gzip members."""
    return scan_gzip_members(path)[0]


def scan_gzip_members(path: Path) -> tuple[int, bool]:
    """``(good, damaged)``: the length of the longest prefix of ``path`` made of complete,
    valid gzip members, and whether what follows it is damage rather than (the start of) one
    valid member, as a kill leaves. Raises OSError if the file cannot be read.

    Reads the whole file (:func:`scan_gzip_tail` reads its end)."""
    with path.open("rb") as fh:
        good, damaged, _members = _scan_from(fh, 0)
    return good, damaged


def scan_gzip_tail(path: Path, tail_bytes: int = TAIL_BYTES) -> tuple[int, bool]:
    """:func:`scan_gzip_members` of a file whose members before its last ``tail_bytes`` are
    taken as valid (module docstring): ``(good, damaged)``, reading about ``tail_bytes``
    whatever the size of the file. The scan starts at the first offset in the tail where a
    gzip header begins and a whole, valid member follows (so a header's magic bytes met
    inside compressed data are passed over); a tail without one (a member larger than it) is
    taken four times as long, up to the whole file. Raises OSError if the file cannot be
    read."""
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        window = max(tail_bytes, 1)
        while size - window > 0:
            start = size - window
            for candidate in _member_starts(fh, start, size):
                good, damaged, members = _scan_from(fh, candidate)
                if members:
                    return good, damaged
            window *= 4
        good, damaged, _members = _scan_from(fh, 0)
        return good, damaged


def _member_starts(fh: BinaryIO, start: int, end: int) -> Iterator[int]:
    """Offsets in ``[start, end)`` where the gzip magic and deflate method (``_MAGIC``)
    begin, in order; ``fh``'s position is left anywhere."""
    pos = start
    while pos < end:
        fh.seek(pos)
        block = fh.read(min(_CHUNK, end - pos) + len(_MAGIC) - 1)  # a magic across the end
        at = block.find(_MAGIC)
        while 0 <= at < _CHUNK:
            yield pos + at  # the caller may move fh: the next block is sought again
            at = block.find(_MAGIC, at + 1)
        pos += _CHUNK


def _scan_from(fh: BinaryIO, start: int) -> tuple[int, bool, int]:
    """``(good, damaged, members)`` of the members from offset ``start`` to the end of ``fh``
    (``good``: the end of the last complete one, ``start`` if none; ``members``: how many).

    Reads ``_CHUNK`` bytes at a time and inflates with ISA-L (standard zlib semantics, about
    2.3x zlib's speed), at most ``_OUT`` bytes of output per call, which are thrown away: memory
    stays a few MiB whatever the size of a member. ``pos`` is the file offset of ``buf[0]``.
    At a member's end only ``unused_data`` is what follows it: ``unconsumed_tail`` may still
    hold a copy of the same bytes there (subtracting both gave negative lengths, issue 9).
    """
    good = pos = start
    members = 0
    decomp = isal_zlib.decompressobj(_GZIP_WBITS)
    buf = b""
    fh.seek(start)
    while True:
        if not buf:
            buf = fh.read(_CHUNK)
            if not buf:
                return good, False, members  # inside a member, or just after a whole one
        try:
            decomp.decompress(buf, _OUT)
        except _INFLATE_ERROR:
            return good, True, members
        if decomp.eof:
            rest = decomp.unused_data
            pos += len(buf) - len(rest)
            good = pos
            members += 1
            buf = rest
            decomp = isal_zlib.decompressobj(_GZIP_WBITS)
        else:
            tail = decomp.unconsumed_tail
            pos += len(buf) - len(tail)
            buf = tail


def set_aside(path: Path) -> Path:
    """Rename ``path`` (a file or directory) to ``<name>.damaged-<UTC YYYYmmddTHHMMSSZ>``,
    with a ``-<n>`` suffix if that exists; returns the new path. Raises OSError."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists() or target.is_symlink():
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        n += 1
    os.rename(path, target)
    return target


def _set_aside_or_say(path: Path, why: str, consequence: str, warnings: list[str]) -> None:
    """Set ``path`` aside and add a warning saying why, where it went and what to do."""
    try:
        moved = set_aside(path)
    except OSError as exc:
        message = (f"{path}: {why}; it could not be set aside ({exc}): move it out of the "
                   f"way by hand, or the next run meets it again. {consequence}")  # fmt: skip
    else:
        message = (f"{path}: {why}; set aside as {moved.name}, for a person to look at "
                   f"(delete it when done). {consequence}")  # fmt: skip
    log.warning("%s", message)
    warnings.append(message)


@dataclass(slots=True)
class WarcRecovery:
    """What :func:`recover_warcs` did: the files it closed, and warnings for the report."""

    recovered: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def recover_warcs(directory: Path) -> WarcRecovery:
    """Close every ``*.open`` WARC file in ``directory`` (module docstring); never raises."""
    result = WarcRecovery()
    try:
        paths = sorted(directory.glob("*.open")) if directory.is_dir() else []
    except OSError as exc:
        _warn(result.warnings, f"{directory}: cannot be listed ({exc}): unfinished WARC files "
              "in it were not checked; make it readable and start the crawl again")  # fmt: skip
        return result
    for path in paths:
        try:
            _recover_warc(path, result)
        except OSError as exc:
            _set_aside_or_say(
                path,
                f"cannot be read or repaired ({exc})",
                "Whatever records it holds stay in the file set aside; pages not yet marked "
                "done are fetched again.",
                result.warnings,
            )
    return result


def _warn(warnings: list[str], message: str) -> None:
    log.warning("%s", message)
    warnings.append(message)


def _recover_warc(path: Path, result: WarcRecovery) -> None:
    size = regular_file(path).st_size  # a symbolic link or a directory: set aside
    good, damaged = scan_gzip_tail(path)
    final = path.with_name(path.name[: -len(".open")])
    if good == 0 and not damaged and size <= WARCINFO_MAX_BYTES:
        log.warning("%s: killed while starting the file, no record in it: removed", path)
        path.unlink()
        return
    if good == 0:
        _set_aside_or_say(
            path,
            "no complete WARC record, and not what a killed crawl leaves (not a gzip prefix, "
            f"or {size} bytes, more than a warcinfo record)",
            "It holds no record this crawl can use.",
            result.warnings,
        )
        return
    if good < size and damaged:
        tail = _copy_tail(path, good)
        _warn(result.warnings, f"{path}: bytes {good} to {size} are not a complete WARC record "
              f"and not what a killed crawl leaves (disk damage?): copied to {tail.name} and "
              f"cut; the {final.name} kept holds the records before them. Look at {tail.name} "
              "(records after the damage may be recoverable with other tools), then delete "
              "it.")  # fmt: skip
    elif good < size:
        log.warning("%s: cut %d bytes of an unfinished record", path, size - good)
    if good < size:
        with os.fdopen(open_existing(path, writable=True), "r+b") as fh:
            fh.truncate(good)
            os.fsync(fh.fileno())
    os.replace(path, final)
    result.recovered.append(final)


def _copy_tail(path: Path, start: int) -> Path:
    """Copy the bytes of ``path`` from ``start`` to a ``.damaged-`` file beside it (fsynced)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}-from-{start}")
    with path.open("rb") as src, target.open("xb") as dst:
        src.seek(start)
        while block := src.read(_CHUNK):
            dst.write(block)
        dst.flush()
        os.fsync(dst.fileno())
    return target


def recover_lines(path: Path) -> list[str]:
    """Repair a JSONL crawl log (module docstring); returns warnings, never raises."""
    warnings: list[str] = []
    if not path.exists() and not path.is_symlink():
        return warnings
    try:
        problem = _cut_last_line(path)
    except OSError as exc:
        problem = f"cannot be read or repaired ({exc})"
    if problem is not None:
        _set_aside_or_say(
            path,
            problem,
            "A new crawl log begins now; the lines of the earlier runs are in the file set "
            "aside (its readable lines can be appended to the new log by hand).",
            warnings,
        )
    return warnings


def _cut_last_line(path: Path) -> str | None:
    """Cut an unfinished last line; returns what is wrong with the file beyond that, if any."""
    regular_file(path)  # a symbolic link or a directory: set aside
    with os.fdopen(open_existing(path, writable=True), "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return None
        start = max(0, size - _LOG_TAIL)
        fh.seek(start)
        block = fh.read(size - start)
        while (i := block.rfind(b"\n")) < 0 and start > 0:  # a last line longer than the tail
            start = max(0, start - _LOG_TAIL)
            fh.seek(start)
            block = fh.read(size - start)
        keep = start + i + 1
        leftover = block[i + 1 :]
        if leftover and (not leftover.startswith(b"{") or b"\0" in leftover):
            return f"its last {len(leftover)} bytes are not the start of a crawl-log line"
        complete = block[: i + 1].split(b"\n")[:-1]
        if start > 0 and complete:
            complete = complete[1:]  # the first may be the end of a line that began earlier
        for line in complete[-_LINES_CHECKED:]:
            try:
                if not isinstance(msgspec.json.decode(line), dict):
                    raise msgspec.DecodeError("not an object")
            except msgspec.DecodeError:
                return "its last lines are not JSON objects (not what a killed crawl leaves)"
        if keep < size:
            fh.truncate(keep)
            log.warning("%s: cut an unfinished line of %d bytes", path, size - keep)
    return None
