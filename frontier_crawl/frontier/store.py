"""The LMDB environment and the queue store: every host queue in one sorted database.

Key layout (as Heritrix's ``BdbMultipleWorkQueues``)::

    db b"queue":  host (ASCII origin) | 0x00 | prio (u8) | seq (u64, big-endian)
                  -> a msgpack array, one of (value formats below)
                     [url: str, depth, hops, attempt, referrer: str | nil]       (full)
                     [rest: bin, depth, hops, attempt]                           (compact)
                     [rest: bin, depth, hops, attempt, shared: int, ref: bin]   (compact)
    db b"meta":   b"seq_hwm" -> u64 big-endian: no key ever used a larger seq

``host`` is a canonical origin such as ``http://a.demo:8080``; it never contains NUL. Keys of
one host therefore all start with ``host + b"\\x00"`` and nothing else does: another host that
shares the prefix (``http://a.demo`` and ``http://a.demo:81``) has a byte other than NUL at that
position, because hosts contain no NUL. Since NUL is the smallest byte, a host's keys are also
contiguous and sort by (prio, seq): a cursor from ``host\\x00`` is that host's FIFO, with prio 0
(retries, redirects) served before prio 1 (normal).

Value formats. ``put`` and ``rewrite`` write the compact format whenever the URL starts with
the key's host (the frontier's host key is the URL's origin, so always): ``rest`` is the URL
after the host (``/path?query``, UTF-8 bytes), and a referrer is stored as the length of the
prefix it shares with the URL plus the rest of it (a link's referrer is usually a page of the
same host, often of the same directory). Compared with the full format this saves the origin
twice and the shared part of the referrer: about 40% of the value, a quarter of the entry
(node header and key included). The first element's msgpack type tells the formats apart (a
``bin`` is never a ``str``), so values written by older versions still decode. ``encode_entry``
and ``decode_entry`` are the full format, which needs no host.

Sequence numbers come from one in-memory counter shared by all hosts. ``put`` reserves blocks
of ``SEQ_BLOCK`` numbers by writing the block's end to ``meta`` in the same transaction as the
key that first needs it (and at least once per transaction), so every committed key's seq is at
most the committed high-water mark, and a restart, which starts at high-water mark + 1, never
reuses the seq of a key still present. An aborted transaction rolls back its keys and its
reservation together.

Durability (``open_env``): ``sync=True, metasync=False``. A commit writes its pages with
``write()`` and ``fdatasync``s the data, but not the meta page. A process killed with SIGKILL
loses no committed transaction (the written pages are in the page cache, which outlives the
process). After a power loss the last transactions may be gone, because their meta page may
not have reached the disk, but the database is intact: LMDB keeps the previous meta page valid.
``sync=False`` would let the kernel write the meta page before the data it points to, so a
power loss could corrupt the file. ``Environment.sync(True)`` makes everything durable (the
frontier calls it at each checkpoint). Because a commit costs an ``fdatasync``, batch many
operations per transaction.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import lmdb
import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "SEQ_BLOCK",
    "QueueEntry",
    "QueueStore",
    "decode_entry",
    "decode_key",
    "decode_stored",
    "encode_entry",
    "encode_key",
    "encode_stored",
    "open_env",
    "release_mapped_pages",
]

SEQ_BLOCK = 4096
"""Sequence numbers reserved per ``meta`` write."""

_KEY_TAIL = struct.Struct(">BQ")
_TAIL_LEN = _KEY_TAIL.size + 1  # NUL separator, prio, seq
_U64 = struct.Struct(">Q")
_HWM_KEY = b"seq_hwm"
_MADV_DONTNEED = 4  # Linux


def open_env(path: Path, map_size: int, *, sync: bool = True) -> lmdb.Environment:
    """Open (creating) the LMDB environment directory ``path`` (durability: module docstring).

    ``sync=False`` (LMDB's ``MDB_NOSYNC``) skips the ``fdatasync`` of each commit: a killed
    process still loses no committed transaction, but a power cut or OS crash between two
    ``Environment.sync(True)`` calls may corrupt the database. Only for crawls that may restart
    from scratch, and for measuring what the per-commit flush costs.
    """
    return lmdb.open(
        str(path),
        map_size=map_size,
        subdir=True,
        max_dbs=8,
        sync=sync,
        metasync=False,
        readahead=False,
        lock=True,
    )


def release_mapped_pages(env: lmdb.Environment) -> int:
    """Unmap the LMDB pages this process has touched; returns the bytes of mapping advised.

    LMDB reads through a shared, read-only memory map of ``data.mdb``, so every page a lookup
    touches stays counted in the process's RSS (``RssFile``) until the kernel needs the memory,
    and RSS grows with the database although no process memory does. ``madvise(MADV_DONTNEED)``
    on the map drops those page-table entries: RSS falls back to the process's own memory,
    nothing is lost (the pages stay in the page cache, clean: this environment never writes
    through the map) and the next access faults a page back in (~1 us). Linux only: elsewhere,
    or if the map is not found, it does nothing and returns 0. Call it now and then (at a
    checkpoint), not per operation.
    """
    data = os.path.realpath(os.path.join(env.path(), "data.mdb"))
    try:
        with open("/proc/self/maps") as maps:
            ranges = [
                (int(lo, 16), int(hi, 16))
                for lo, hi, path in (_map_line(line) for line in maps)
                if path == data
            ]
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return 0
    advised = 0
    for lo, hi in ranges:
        if libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), _MADV_DONTNEED) == 0:
            advised += hi - lo
    return advised


def _map_line(line: str) -> tuple[str, str, str]:
    """``(start, end, path)`` of one /proc/self/maps line (hex addresses, path or "")."""
    fields = line.split(maxsplit=5)
    lo, _, hi = fields[0].partition("-")
    return lo, hi, fields[5].rstrip("\n") if len(fields) == 6 else ""


# ------------------------------------------------------------------------------- key codec


def encode_key(host: str, prio: int, seq: int) -> bytes:
    """``host \\x00 prio:u8 seq:u64be``; ValueError for a NUL in host or an out-of-range number."""
    if "\x00" in host:
        raise ValueError(f"host contains NUL: {host!r}")
    try:
        return host.encode("ascii") + b"\x00" + _KEY_TAIL.pack(prio, seq)
    except struct.error as exc:
        raise ValueError(f"prio {prio} or seq {seq} out of range") from exc


def decode_key(key: bytes) -> tuple[str, int, int]:
    """Inverse of ``encode_key``: (host, prio, seq)."""
    if len(key) < _TAIL_LEN or key[-_TAIL_LEN] != 0:
        raise ValueError(f"not a queue key: {key!r}")
    prio, seq = _KEY_TAIL.unpack_from(key, len(key) - _KEY_TAIL.size)
    return key[:-_TAIL_LEN].decode("ascii"), prio, seq


def _host_prefix(host: str) -> bytes:
    return host.encode("ascii") + b"\x00"


# ----------------------------------------------------------------------------- entry codec


class QueueEntry(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A queued URL. Encoded as a msgpack array (field order is the format: append only).

    ``gc=False``: entries hold only str, int and None, so they cannot form reference cycles
    and the garbage collector need not track the many thousands held in memory.
    """

    url: str
    depth: int
    hops: int = 0
    attempt: int = 0
    referrer: str | None = None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(QueueEntry)
_BIN_TYPES = frozenset((0xC4, 0xC5, 0xC6))  # msgpack bin 8/16/32


def encode_entry(entry: QueueEntry) -> bytes:
    """msgpack bytes of an entry (the full format: module docstring)."""
    return _encoder.encode(entry)


def decode_entry(data: bytes) -> QueueEntry:
    """Inverse of ``encode_entry`` (``msgspec.DecodeError`` on bad data)."""
    return _decoder.decode(data)


def encode_stored(host: str, entry: QueueEntry) -> bytes:
    """The value ``put`` stores for ``entry`` under a key of ``host`` (compact if it can)."""
    url = entry.url
    if not url.startswith(host):
        return _encoder.encode(entry)
    url_bytes = url.encode("utf-8")
    rest = url_bytes[len(host.encode("utf-8")) :]
    referrer = entry.referrer
    if referrer is None:
        return _encoder.encode((rest, entry.depth, entry.hops, entry.attempt))
    ref_bytes = referrer.encode("utf-8")
    shared = _shared_prefix(url_bytes, ref_bytes)
    return _encoder.encode(
        (rest, entry.depth, entry.hops, entry.attempt, shared, ref_bytes[shared:])
    )


def decode_stored(host: str, data: bytes) -> QueueEntry:
    """Inverse of ``encode_stored`` for either format (``msgspec.DecodeError`` on bad data)."""
    return _decode_stored(host.encode("utf-8"), data)


class _Compact(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The compact value format (module docstring); ``shared`` is -1 without a referrer."""

    rest: bytes
    depth: int
    hops: int
    attempt: int
    shared: int = -1
    ref: bytes = b""


_compact_decoder = msgspec.msgpack.Decoder(_Compact)


def _decode_stored(host: bytes, data: bytes) -> QueueEntry:
    if len(data) < 2 or data[1] not in _BIN_TYPES:
        return _decoder.decode(data)
    c = _compact_decoder.decode(data)
    url = host + c.rest
    try:
        referrer = (url[: c.shared] + c.ref).decode("utf-8") if c.shared >= 0 else None
        return QueueEntry(url.decode("utf-8"), c.depth, c.hops, c.attempt, referrer)
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"bad compact queue entry: {exc}") from exc


def _shared_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b``: the first differing byte is
    the highest set byte of their XOR as big-endian integers (a few C-level operations)."""
    n = min(len(a), len(b))
    diff = int.from_bytes(a[:n], "big") ^ int.from_bytes(b[:n], "big")
    return n - 1 - (diff.bit_length() - 1) // 8 if diff else n


# ------------------------------------------------------------------------------ the store


class QueueStore:
    """Every host's queue in the ``b"queue"`` database of ``env`` (layout: module docstring).

    Construct it before opening a write transaction on ``env`` (it opens its databases). All
    methods take the caller's transaction, so many operations share one commit.
    """

    def __init__(self, env: lmdb.Environment) -> None:
        self._db = env.open_db(b"queue")
        self._meta = env.open_db(b"meta")
        with env.begin() as txn:
            raw = txn.get(_HWM_KEY, db=self._meta)
        hwm = _U64.unpack(raw)[0] if raw is not None else 0
        self._next_seq = hwm + 1
        self._reserved_upto = hwm
        self._reserved_in: lmdb.Transaction | None = None

    @property
    def next_seq(self) -> int:
        """The seq the next ``put`` will use."""
        return self._next_seq

    def put(self, txn: lmdb.Transaction, host: str, prio: int, entry: QueueEntry) -> bytes:
        """Append ``entry`` to ``host``'s queue in band ``prio``; returns its key."""
        seq = self._next_seq
        if txn is not self._reserved_in or seq > self._reserved_upto:
            self._reserve(txn, seq)
        key = encode_key(host, prio, seq)
        self._next_seq = seq + 1
        if not txn.put(key, encode_stored(host, entry), db=self._db, overwrite=False):
            raise RuntimeError(f"queue key {key!r} already present: seq reused")
        return key

    def rewrite(self, txn: lmdb.Transaction, key: bytes, entry: QueueEntry) -> bool:
        """Store ``entry`` under an existing ``key`` (a retry); False if the key was absent."""
        host = decode_key(key)[0]
        return txn.replace(key, encode_stored(host, entry), db=self._db) is not None

    def read_after(
        self, txn: lmdb.Transaction[bytes], host: str, after: bytes | None, limit: int
    ) -> list[tuple[bytes, QueueEntry]]:
        """``host``'s entries with key > ``after`` (None: from its head), in key order.

        ``txn`` must return bytes (``buffers=False``, the default).
        """
        prefix = _host_prefix(host)
        host_bytes = prefix[:-1]
        start = prefix if after is None or after < prefix else after
        out: list[tuple[bytes, QueueEntry]] = []
        if limit <= 0:
            return out
        with txn.cursor(db=self._db) as cursor:
            if not cursor.set_range(start):
                return out
            for key, value in cursor.iternext():
                if not key.startswith(prefix):
                    break
                if key != after:
                    out.append((key, _decode_stored(host_bytes, value)))
                    if len(out) >= limit:
                        break
        return out

    def delete(self, txn: lmdb.Transaction, key: bytes) -> bool:
        """Remove one entry; False if it was absent."""
        return bool(txn.delete(key, db=self._db))

    def host_counts(self, txn: lmdb.Transaction[bytes]) -> dict[str, int]:
        """Entries per host, in one scan of the keys (for a restart)."""
        counts: dict[bytes, int] = {}
        for host in self._key_hosts(txn):
            counts[host] = counts.get(host, 0) + 1
        return {host.decode("ascii"): n for host, n in counts.items()}

    def count(self, txn: lmdb.Transaction) -> int:
        """Entries in the queue database (from LMDB's statistics, no scan)."""
        return int(txn.stat(self._db)["entries"])

    def _key_hosts(self, txn: lmdb.Transaction[bytes]) -> Iterator[bytes]:
        with txn.cursor(db=self._db) as cursor:
            for key in cursor.iternext(keys=True, values=False):
                yield key[:-_TAIL_LEN]

    def _reserve(self, txn: lmdb.Transaction, seq: int) -> None:
        """Persist a high-water mark covering ``seq`` in ``txn``."""
        upto = max(seq + SEQ_BLOCK - 1, self._reserved_upto)
        txn.put(_HWM_KEY, _U64.pack(upto), db=self._meta)
        self._reserved_upto = upto
        self._reserved_in = txn
