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
import zlib
from pathlib import Path

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
#: more than a compressed warcinfo record can take (ours are well under 1 KiB)
WARCINFO_MAX_BYTES = 16 << 10


def complete_gzip_prefix(path: Path) -> int:
    """Length of the longest prefix of ``path`` made of complete, valid gzip members."""
    good = 0
    pos = 0
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    with path.open("rb") as fh:
        pending = b""
        while True:
            chunk = pending or fh.read(_CHUNK)
            pending = b""
            if not chunk:
                return good
            try:
                while chunk:
                    decomp.decompress(chunk, 1 << 16)
                    consumed = len(chunk) - len(decomp.unconsumed_tail) - len(decomp.unused_data)
                    if decomp.eof:
                        pos += consumed
                        good = pos
                        chunk = decomp.unused_data
                        decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    else:
                        pos += len(chunk) - len(decomp.unconsumed_tail)
                        chunk = decomp.unconsumed_tail
            except zlib.error:
                return good


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
