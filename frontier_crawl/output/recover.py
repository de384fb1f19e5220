"""Start-up repair of outputs left by a process that was killed mid-write.

* A ``.warc.gz.open`` file is cut back to its last complete gzip member (each WARC record is its
  own member, and zlib checks each member's CRC and length at its end), then renamed to its final
  name, so readers never see a truncated record. The records cut away belong to fetches whose
  completion never reached LMDB: they are fetched again. A file without one complete member was
  killed while its first record, the warcinfo, was being written (records are appended in
  order, so nothing of a fetch can follow an incomplete member): it holds no capture and is
  removed. One that is also larger than any warcinfo record was not written that way (another
  program's file, or disk damage): it is set aside as ``.damaged`` for a person to look at.
* ``crawl.jsonl`` is cut back to its last complete line.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import cast

from isal import isal_zlib

log = logging.getLogger(__name__)

_CHUNK = 1 << 20  #: bytes read at a time
_OUT = 1 << 20  #: most bytes inflated per call (discarded)
_GZIP_WBITS = 16 + isal_zlib.MAX_WBITS
#: isal's stub declares ``error`` an instance; it is zlib.error's counterpart, a class
_INFLATE_ERROR = cast("type[Exception]", isal_zlib.error)
#: more than a compressed warcinfo record can take (ours are well under 1 KiB)
WARCINFO_MAX_BYTES = 16 << 10


def complete_gzip_prefix(path: Path) -> int:
    """Length of the longest prefix of ``path`` made of complete, valid gzip members.

    Reads ``_CHUNK`` bytes at a time and inflates with ISA-L (standard zlib semantics, about
    2.3x zlib's speed), at most ``_OUT`` bytes of output per call, which are thrown away: memory
    stays a few MiB whatever the size of a member. ``pos`` is the file offset of ``buf[0]``.
    At a member's end only ``unused_data`` is what follows it: ``unconsumed_tail`` may still
    hold a copy of the same bytes there (subtracting both gave negative lengths, issue 9).
    """
    good = pos = 0
    decomp = isal_zlib.decompressobj(_GZIP_WBITS)
    buf = b""
    with path.open("rb") as fh:
        while True:
            if not buf:
                buf = fh.read(_CHUNK)
                if not buf:
                    return good  # end of file: inside a member, or just after a whole one
            try:
                decomp.decompress(buf, _OUT)
            except _INFLATE_ERROR:
                return good
            if decomp.eof:
                rest = decomp.unused_data
                pos += len(buf) - len(rest)
                good = pos
                buf = rest
                decomp = isal_zlib.decompressobj(_GZIP_WBITS)
            else:
                tail = decomp.unconsumed_tail
                pos += len(buf) - len(tail)
                buf = tail


def recover_warcs(directory: Path) -> list[Path]:
    """Close every ``*.open`` WARC file in ``directory``; returns the recovered files."""
    recovered: list[Path] = []
    if not directory.is_dir():
        return recovered
    for path in sorted(directory.glob("*.open")):
        size = path.stat().st_size
        good = complete_gzip_prefix(path)
        final = path.with_name(path.name[: -len(".open")])
        if good == 0 and size <= WARCINFO_MAX_BYTES:
            log.warning("%s: killed while starting the file, no record in it: removed", path)
            path.unlink()
            continue
        if good == 0:
            log.warning("%s: no complete record, set aside as %s.damaged", path, path.name)
            os.replace(path, path.with_name(path.name + ".damaged"))
            continue
        if good < size:
            log.warning("%s: cut %d bytes of an unfinished record", path, size - good)
            with path.open("r+b") as fh:
                fh.truncate(good)
                os.fsync(fh.fileno())
        os.replace(path, final)
        recovered.append(final)
    return recovered


def recover_lines(path: Path) -> int:
    """Cut a JSONL file back to its last newline; returns the bytes removed."""
    if not path.exists():
        return 0
    with path.open("r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        keep = 0
        step = 1 << 16
        end = size
        while end > 0:  # scan backwards for the last newline
            start = max(0, end - step)
            fh.seek(start)
            block = fh.read(end - start)
            i = block.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            end = start
        fh.truncate(keep)
        log.warning("%s: cut an unfinished line of %d bytes", path, size - keep)
        return size - keep
