"""The LMDB environment and the queue store: every host queue in one sorted database, in blocks.

Layout (as Heritrix's ``BdbMultipleWorkQueues``, with blocks of URLs instead of one per key)::

    db b"queue":  host id (u32) | rank (u24) | seq (u48), all big-endian    (a block key)
                  -> n (u8) | flags (u8) | done mask (ceil(n/8) bytes, little-endian) | payload
    db b"done":   block key -> done mask (ceil(n/8) bytes, little-endian)
    db b"hosts":  b"o" + origin (ASCII) -> host id (u32 big-endian)
                  b"i" + host id (u32)  -> origin
    db b"counts": host id (u32)           -> unfinished entries of the host (u64 big-endian)
    db b"meta":   b"seq_hwm"  -> u64 big-endian: no key ever used a larger seq
                  b"host_hwm" -> u32 big-endian: no origin ever got a larger host id
                  b"counts"   -> b"1": ``counts`` is kept (layout 6; absent: layout 5)

A block holds ``n`` (1 .. ``BLOCK_MAX``) URLs of one host and one rank: the URLs a
transaction queued for that host at that rank, in admission order. Keys of one host all start
with its 4-byte id and sort by (rank, seq), so a cursor from the id is that host's queue in
order, block by block: lower rank first, FIFO within a rank. The entry key of a URL (its
``Ticket.key``) is its block key plus its index in the block (u8): entry keys sort in that
order too.

Rank (``rank_of``): a request's ``priority`` (higher is fetched sooner, as in Scrapy) is
clamped to ``-PRIORITY_MAX .. PRIORITY_MAX`` (+-65535) and stored as ``DEFAULT_RANK -
priority``, with ``DEFAULT_RANK`` = 0x10000: priority 0 (every URL that is not a spider's
request with a priority) has rank 0x010000, so its key's bytes are exactly those of the former
layout ``prio (u8) = 1 | seq (u64)`` (any seq below 2**48, which every state ever had): a
state written before priorities existed resumes in the same order, and its URLs sort with new
priority-0 URLs by seq. Priorities 1 .. 65535 take ranks 0xFFFF .. 1, the former prio byte 0;
rank 0 stays reserved for a band served before every priority (that byte's "retries,
redirects": no code writes it, retries wait in memory, ``Frontier._pop``, in their own key,
and a redirect's target is queued at its request's priority). Priorities beyond the range sort
with its end (FIFO among them); the entry keeps the priority as given.

Payload: a msgpack array of ``n`` items ``[rest: bin, depth, hops, attempt, shared, ref,
absolute, callback, meta, priority]`` (trailing defaults omitted: hops 0, attempt 0, shared
-1, ref b"", absolute false, callback "", meta b"", priority 0; so a URL without a spider's
callback, meta or priority costs what it did before they existed). ``callback`` is the name
of the spider callback the URL's response goes to ("": the default), ``meta`` the request's
meta as msgpack, ``priority`` the request's priority (its key's rank orders the queue).
``rest`` is the URL after the host's origin (``/path?query``, UTF-8), or the whole URL
when ``absolute``; a referrer is the length ``shared`` of the prefix it shares with the URL
plus the rest of it, ``ref`` (``shared`` -1: no referrer). A referrer on another origin that has
a host id (the page that linked across hosts) is that origin followed by ``ref``, with
``shared`` = -2 - host id: the origin costs 5 bytes instead of its length. With flag bit 0 the
payload is raw DEFLATE (zlib level 1, used when it is smaller): the URLs of one page share
most of their path and the referrer, so a block of 15 compresses about fivefold. A block of 15
bench URLs costs about 25 bytes per URL in its leaf page instead of ~150 for a key and value
per URL; a one-URL block still saves the origin twice (key and referrer).

Completion is durable per URL: bit ``i`` of a block's done mask says entry ``i`` is finished
(or taken out: robots-denied, retired host). The mask is the OR of the one in the block's value
(entries finished before the block was first written, or when a retry rewrote it) and the one
in ``b"done"``. The store keeps a small record (``_Block``) of every block with entries held in
memory (the frontier's hot lists or in flight); ``done`` sets the bit there, and ``flush``
(called by the frontier just before each commit) writes the mask of every block changed in the
transaction to ``b"done"``, or deletes the block and its mask once every entry is done.
``read_after`` skips the entries whose bit is set, and the entries held in memory (a held mask
per record: ``release`` gives one back to LMDB, for the frontier's memory budget). A kill
therefore loses no queued URL and forgets only the completions of the transaction in flight.
The masks live in their own small database (one entry per partly finished block, which are the
blocks with entries in memory, so a few thousand) because a commit's cost is mostly its dirty
pages: a drain that finishes one URL on each of 1,000 hosts per commit rewrites ~1,000 queue
pages if masks live in the blocks, but a few dozen pages of ``b"done"`` (plus one page per
block finished).

Blocks are written at ``flush``, not at ``add``: ``add`` appends to the host's open block of the
transaction (its key, hence every entry key, is fixed at once), so a transaction writes one
value per host it queued URLs for. ``read_after`` also reads the open blocks, so a URL queued
and refilled in the same transaction is found. The store changes its in-memory records only in
``committed``. After an abort (``aborted``) the open blocks are dropped, as the seen-set entries
of their URLs were (the frontier may still hold those URLs in memory, as it did before blocks:
they are fetched, and their completion is a no-op), while the masks it changed stay pending
and are written by the next commit, with the host ids it assigned.

Per-host counts (``b"counts"``, layout 6) let a restart know how many URLs each host has
queued without reading a block (``host_counts``; the scan of every block, ``scan_host_counts``,
took most of a reopen: ~30 million blocks at 10^8 URLs over 10^6 hosts). They change in the
transactions that change the blocks, so they are exact whenever the blocks are: ``flush`` adds
each written block's unfinished entries to its host's count and subtracts the entries of
stored blocks that ``done`` finished in the transaction (a read and a write per host the
transaction touched, through one cursor in key order; a count that reaches 0 is deleted). A
``rewrite`` leaves its block dirty, so its completions are written even if its new value is
lost to an abort. The finished entries of a block the
transaction wrote are never counted. After an abort the open blocks' counts go with them and
the stored blocks' completions stay pending, as their masks do. A state of layout 5 (no
``b"counts"`` marker in ``meta``) with queued blocks gets its counts from one scan when the
store is constructed, written with the marker in one transaction: the first start of the new
version pays the old reopen once.

Sequence numbers come from one in-memory counter shared by all hosts (below 2**48: ~9,000
years of a block a millisecond). A new block reserves
blocks of ``SEQ_BLOCK`` numbers by writing the reservation's end to ``meta`` in the same
transaction (and at least once per transaction that writes a block), so every committed key's
seq is at most the committed high-water mark, and a restart, which starts at high-water mark +
1, never reuses the seq of a key still present. Host ids work the same way: an origin's id is
written to ``hosts`` (both directions) and ``host_hwm`` by every commit until one succeeds.

Durability (``open_env``): ``sync=True, metasync=False``. A commit writes its pages with
``write()`` and ``fdatasync``s the data, but not the meta page. A process killed with SIGKILL
loses no committed transaction (the written pages are in the page cache, which outlives the
process). After a power loss the last transactions may be gone, because their meta page may
not have reached the disk, but the database is intact: LMDB keeps the previous meta page valid.
``sync=False`` would let the kernel write the meta page before the data it points to, so a
power loss could corrupt the file. ``Environment.sync(True)`` makes everything durable (the
frontier calls it at each checkpoint). Because a commit costs an ``fdatasync``, batch many
operations per transaction.

Errors (``storage_errors``): LMDB raises its own ``lmdb.Error`` subclasses (a full disk is
``lmdb.DiskError: mdb_txn_commit: No space left on device``). The frontier turns them into
:class:`StorageError`, an ``OSError`` with the errno when the message names one, at its
transaction and sync boundaries, so callers handle one kind of write failure and never import
lmdb. A transaction whose commit failed is aborted: the state stays as of the last commit.

A continuous crawl (``[recrawl] enabled``) adds two databases to the same environment,
``b"recrawl-visits"`` and ``b"recrawl-due"`` (layout: ``recrawl.py``); they are created when
recrawl is first enabled, so a state without them is an ordinary crawl's and either kind resumes.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import lmdb
import msgspec

from frontier_crawl.frontier.damage import DamagedState, disk_trouble
from frontier_crawl.safefs import make_dir, regular_file

__all__ = [
    "BLOCK_MAX",
    "DEFAULT_RANK",
    "PRIORITY_MAX",
    "SEQ_BLOCK",
    "QueueEntry",
    "QueueStore",
    "StorageError",
    "decode_block",
    "decode_key",
    "encode_block",
    "encode_key",
    "key_before",
    "key_rank",
    "open_env",
    "rank_of",
    "release_mapped_pages",
    "storage_errors",
]

SEQ_BLOCK = 4096
"""Sequence numbers reserved per ``meta`` write."""
BLOCK_MAX = 64
"""Most URLs in one block (its done mask is then 8 bytes)."""

DEFAULT_RANK = 0x10000
"""The rank of priority 0 (the former layout's prio byte 1, its keys' bytes unchanged)."""
PRIORITY_MAX = 0xFFFF
"""Priorities are clamped to ``-PRIORITY_MAX .. PRIORITY_MAX`` in the key (rank 1 .. 0x1FFFF)."""

BLOCK_KEY_LEN = 13  # host id (4) | rank (3) | seq (6)
_RANK_MAX = (1 << 24) - 1
_SEQ_MAX = (1 << 48) - 1
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_HWM_KEY = b"seq_hwm"
_HOST_HWM_KEY = b"host_hwm"
_COUNTS_KEY = b"counts"  # in meta: b"counts" is kept (layout 6)
_ZLIB = 1  # flag: payload is raw DEFLATE
_ZLIB_MIN = 96  # payloads shorter than this are stored as they are
_MADV_DONTNEED = 4  # Linux
_ORIGIN_CACHE_MAX = 65_536
_POPCOUNT = bytes(i.bit_count() for i in range(256))


log = logging.getLogger(__name__)


class StorageError(OSError):
    """Writing the frontier's state failed (a full disk, an I/O error, a read-only remount)."""


#: errnos recognised in LMDB's messages (it reports ``strerror`` text, not the number)
_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EACCES, errno.ENOMEM)


@contextlib.contextmanager
def storage_errors(path: Path) -> Iterator[None]:
    """Raise an ``lmdb.Error`` from inside as a :class:`StorageError` naming ``path``."""
    try:
        yield
    except lmdb.Error as exc:
        raise storage_error(path, exc) from exc


#: free bytes below which a failed write's filesystem counts as full (LMDB writes pages)
_FULL_BELOW = 1 << 20


def storage_error(path: Path, exc: lmdb.Error) -> StorageError:
    """``exc`` as a StorageError naming ``path``. LMDB reports a *short* write (the disk
    filled in the middle of one) as EIO ("TODO: Use which error code?" in its
    ``mdb_page_flush``): an I/O error on a filesystem with almost nothing free is said to
    be what it is, no space (ENOSPC), so that the operator frees space rather than checks a
    disk that is fine (seen in CI on a full tmpfs)."""
    text = str(exc)
    code = storage_errno(exc)
    if code == errno.EIO and (free := _free_bytes(path)) is not None and free < _FULL_BELOW:
        text += (f" ({os.strerror(errno.ENOSPC)}: {free} bytes free on its filesystem; LMDB "
                 "reports a write the full disk cut short as an I/O error)")  # fmt: skip
        code = errno.ENOSPC
    err = StorageError(f"{path}: {text}")
    err.errno = code
    return err


def _free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``path``'s filesystem (its nearest
    existing ancestor's); None if none can be looked at."""
    for candidate in (path, *path.parents):
        try:
            st = os.statvfs(candidate)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return None


def storage_errno(exc: lmdb.Error) -> int | None:
    """The errno of a failing write (no space, I/O error, read-only...) an LMDB error reports."""
    text = str(exc)
    return next((c for c in _ERRNOS if os.strerror(c) in text), None)


def open_env(path: Path, map_size: int, *, sync: bool = True) -> lmdb.Environment:
    """Open (creating) the LMDB environment directory ``path`` (durability: module docstring).

    ``sync=False`` (LMDB's ``MDB_NOSYNC``) skips the ``fdatasync`` of each commit: a killed
    process still loses no committed transaction, but a power cut or OS crash between two
    ``Environment.sync(True)`` calls may corrupt the database. Only for crawls that may restart
    from scratch, and for measuring what the per-commit flush costs.

    The directory is made 0700 if it is new; its ``data.mdb`` and ``lock.mdb`` must be regular
    files if they exist (an OSError, ELOOP, for a symbolic link: LMDB would follow it), and
    are created 0600. A symbolic link at ``lock.mdb``, which holds no data (LMDB rebuilds it),
    is removed instead.
    """
    make_dir(path, private=True)
    lock = path / "lock.mdb"
    if lock.is_symlink():
        lock.unlink()
    for name in ("data.mdb", "lock.mdb"):
        with contextlib.suppress(FileNotFoundError):
            regular_file(path / name)
    return lmdb.open(
        str(path),
        map_size=map_size,
        mode=0o600,
        subdir=True,
        max_dbs=16,
        sync=sync,
        metasync=False,
        readahead=False,
        lock=True,
    )


def open_checked_env(
    path: Path, map_size: int, consequence: str, *, sync: bool = True
) -> lmdb.Environment:
    """:func:`open_env`, after checks that a damaged environment fails now, as DamagedState,
    rather than later: LMDB's open (its meta pages), and a ``data.mdb`` at least as long as
    the pages the meta page says are in use (reading a page past the end of a truncated file
    through the memory map would kill the process with SIGBUS). ``consequence``: what
    setting it aside means, for the DamagedState."""
    data = path / "data.mdb"
    if data.is_file() and data.stat().st_size == 0:  # LMDB would take it for a new one
        raise DamagedState(path, "data.mdb is empty (its pages are lost)", consequence)
    try:
        env = open_env(path, map_size, sync=sync)
    except OSError as exc:  # a symbolic link or a directory where LMDB's files go
        trouble = disk_trouble(path, exc)
        if trouble is not None:
            raise trouble from exc
        raise DamagedState(path, f"not a usable LMDB environment ({exc})", consequence) from exc
    except lmdb.Error as exc:
        if storage_errno(exc) is not None:  # a full or failing disk, not a damaged file
            raise storage_error(path, exc) from exc
        raise DamagedState(path, f"not a usable LMDB environment ({exc})", consequence) from exc
    try:
        used = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        size = data.stat().st_size
    except (lmdb.Error, OSError) as exc:
        env.close()
        raise DamagedState(path, f"not a usable LMDB environment ({exc})", consequence) from exc
    if size < used:
        env.close()
        raise DamagedState(
            path, f"data.mdb is truncated ({size} bytes, its pages take {used})", consequence
        )
    return env


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


def rank_of(priority: int) -> int:
    """The key rank of a request's priority (module docstring): higher priority, lower rank;
    priorities beyond +-``PRIORITY_MAX`` are clamped to it."""
    if priority > PRIORITY_MAX:
        priority = PRIORITY_MAX
    elif priority < -PRIORITY_MAX:
        priority = -PRIORITY_MAX
    return DEFAULT_RANK - priority


def encode_key(host_id: int, rank: int, seq: int) -> bytes:
    """The block key ``host_id:u32 rank:u24 seq:u48`` (big-endian); ValueError if out of range."""
    if not (0 <= host_id <= 0xFFFFFFFF and 0 <= rank <= _RANK_MAX and 0 <= seq <= _SEQ_MAX):
        raise ValueError(f"host id {host_id}, rank {rank} or seq {seq} out of range")
    return _U32.pack(host_id) + (rank << 48 | seq).to_bytes(9, "big")


def decode_key(key: bytes) -> tuple[int, int, int, int | None]:
    """(host id, rank, seq, index) of a block key (index None) or an entry key."""
    if len(key) not in (BLOCK_KEY_LEN, BLOCK_KEY_LEN + 1):
        raise ValueError(f"not a queue key: {key!r}")
    low = int.from_bytes(key[4:BLOCK_KEY_LEN], "big")
    index = key[BLOCK_KEY_LEN] if len(key) > BLOCK_KEY_LEN else None
    return _U32.unpack_from(key)[0], low >> 48, low & _SEQ_MAX, index


def key_rank(key: bytes) -> int:
    """The rank of a block or entry key."""
    return int.from_bytes(key[4:7], "big")


def key_before(key: bytes) -> bytes:
    """The greatest key ``read_after`` takes that sorts before the entry key ``key``: reading
    after it starts at ``key`` (the entry before it in its block, or its bare block key)."""
    index = key[BLOCK_KEY_LEN]
    return key[:BLOCK_KEY_LEN] + bytes((index - 1,)) if index else key[:BLOCK_KEY_LEN]


# ----------------------------------------------------------------------------- entry codec


class QueueEntry(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A queued URL (in memory; stored as an item of a block, module docstring).

    ``gc=False``: entries hold only str, int and None, so they cannot form reference cycles
    and the garbage collector need not track the many thousands held in memory.
    """

    url: str
    depth: int
    hops: int = 0
    attempt: int = 0
    referrer: str | None = None
    callback: str = ""  #: the spider callback's name ("": the default, ``parse``)
    meta: bytes = b""  #: the request's meta, msgpack (b"": none)
    priority: int = 0  #: the request's priority (higher first in its host's queue: ``rank_of``)


class _Item(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One URL of a block payload, as decoded (module docstring; ``_item`` encodes it)."""

    rest: bytes
    depth: int
    hops: int = 0
    attempt: int = 0
    shared: int = -1
    ref: bytes = b""
    absolute: bool = False
    callback: str = ""
    meta: bytes = b""
    priority: int = 0


_encoder = msgspec.msgpack.Encoder()
_item_decoder = msgspec.msgpack.Decoder(_Item)
_raw_decoder = msgspec.msgpack.Decoder(list[msgspec.Raw])


_ItemTuple = tuple[bytes | str | int | bool, ...]
RefHosts = Callable[[str], int]
"""The host id of an origin, -1 if it has none (for referrers)."""
RefOrigins = Callable[[int], "bytes | None"]
"""The origin of a host id, None if unknown (for referrers)."""


def _item(host: bytes, entry: QueueEntry, ref_host: RefHosts | None) -> _ItemTuple:
    """The msgpack array of one entry, trailing defaults omitted (``_Item`` decodes it)."""
    if entry.callback or entry.meta or entry.priority:  # a spider's request: all ten items
        base = _plain_item(host, entry, ref_host)
        return (*base, *_ITEM_DEFAULTS[len(base) :], entry.callback, entry.meta, entry.priority)
    return _plain_item(host, entry, ref_host)


#: the defaults of _Item's fields ``hops`` to ``absolute``, by position
_ITEM_DEFAULTS: _ItemTuple = (b"", 0, 0, 0, -1, b"", False)


def _plain_item(host: bytes, entry: QueueEntry, ref_host: RefHosts | None) -> _ItemTuple:
    """The first seven items of an entry's array, trailing defaults omitted."""
    url = entry.url.encode("utf-8")
    referrer = entry.referrer
    if not url.startswith(host):
        ref = b"" if referrer is None else referrer.encode("utf-8")
        shared = -1 if referrer is None else _shared_prefix(url, ref)
        return (url, entry.depth, entry.hops, entry.attempt, shared, ref[max(shared, 0) :], True)
    rest = url[len(host) :]
    if referrer is None:
        if entry.hops or entry.attempt:
            return (rest, entry.depth, entry.hops, entry.attempt)
        return (rest, entry.depth)
    ref = referrer.encode("utf-8")
    shared = _shared_prefix(url, ref)
    if shared < len(host) and ref_host is not None:  # another origin's page
        end = referrer.find("/", 8)
        ref_origin = referrer if end < 0 else referrer[:end]
        host_id = ref_host(ref_origin) if ref_origin.isascii() else -1
        if host_id >= 0:
            return (rest, entry.depth, entry.hops, entry.attempt, -2 - host_id,
                    ref[len(ref_origin) :])  # fmt: skip
    return (rest, entry.depth, entry.hops, entry.attempt, shared, ref[shared:])


def _entry(host: bytes, item: _Item, origins: RefOrigins | None) -> QueueEntry:
    url = item.rest if item.absolute else host + item.rest
    shared = item.shared
    try:
        if shared >= 0:
            referrer: str | None = (url[:shared] + item.ref).decode("utf-8")
        elif shared == -1:
            referrer = None
        else:
            ref_origin = origins(-2 - shared) if origins is not None else None
            if ref_origin is None:
                raise msgspec.DecodeError(f"referrer of unknown host id {-2 - shared}")
            referrer = (ref_origin + item.ref).decode("utf-8")
        if item.callback or item.meta or item.priority:
            return QueueEntry(url.decode("utf-8"), item.depth, item.hops, item.attempt,
                              referrer, item.callback, item.meta, item.priority)  # fmt: skip
        return QueueEntry(url.decode("utf-8"), item.depth, item.hops, item.attempt, referrer)
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"bad queue block item: {exc}") from exc


def _items(host: bytes, entries: list[QueueEntry], ref_host: RefHosts | None) -> list[_ItemTuple]:
    """``[_item(host, e, ref_host) for e in entries]``, the same tuples, with the common case
    inlined (a plain entry of the block's host with a referrer) and what depends only on the
    referrer (its bytes, its origin's host id) worked out once per run of entries sharing it:
    a page's links of one host, in one block, share the page as their referrer."""
    out: list[_ItemTuple] = []
    append = out.append
    size = len(host)
    last: str | None = None  #: the referrer ``ref``, ``ref_id`` and ``ref_tail`` are of
    ref = ref_tail = b""
    ref_id = -3  #: -3: not looked up yet for ``last``; -1: no host id
    from_bytes = int.from_bytes
    for entry in entries:
        referrer = entry.referrer
        url = entry.url.encode("utf-8")
        if (
            referrer is None
            or entry.callback
            or entry.meta
            or entry.priority
            or not url.startswith(host)
        ):
            append(_item(host, entry, ref_host))
            continue
        if referrer is not last:
            last = referrer
            ref = referrer.encode("utf-8")
            ref_id = -3
        n = min(len(url), len(ref))
        diff = from_bytes(url[:n], "big") ^ from_bytes(ref[:n], "big")
        shared = n - 1 - (diff.bit_length() - 1) // 8 if diff else n  # _shared_prefix
        if shared < size and ref_host is not None:  # another origin's page
            if ref_id == -3:
                end = referrer.find("/", 8)
                ref_origin = referrer if end < 0 else referrer[:end]
                ref_id = ref_host(ref_origin) if ref_origin.isascii() else -1
                ref_tail = ref[len(ref_origin) :]
            if ref_id >= 0:
                append((url[size:], entry.depth, entry.hops, entry.attempt, -2 - ref_id,
                        ref_tail))  # fmt: skip
                continue
        append((url[size:], entry.depth, entry.hops, entry.attempt, shared, ref[shared:]))
    return out


def encode_block(
    host: str, entries: list[QueueEntry], mask: int = 0, ref_host: RefHosts | None = None
) -> bytes:
    """The stored value of a block of ``host``'s ``entries`` with done mask ``mask``;
    ``ref_host`` gives the host id of a referrer's origin (-1: none), see module docstring."""
    n = len(entries)
    if not 0 < n <= BLOCK_MAX:
        raise ValueError(f"a block holds 1 to {BLOCK_MAX} entries, not {n}")
    host_bytes = host.encode("utf-8")
    payload = _encoder.encode(_items(host_bytes, entries, ref_host))
    flags = 0
    if len(payload) >= _ZLIB_MIN:
        packed = zlib.compress(payload, 1, -15)
        if len(packed) < len(payload):
            payload, flags = packed, _ZLIB
    return bytes((n, flags)) + mask.to_bytes((n + 7) // 8, "little") + payload


def block_header(value: bytes) -> tuple[int, int]:
    """(n, done mask) of a stored block value."""
    n = value[0]
    return n, int.from_bytes(value[2 : 2 + (n + 7) // 8], "little")


def decode_block(
    host: str, value: bytes, origins: RefOrigins | None = None
) -> tuple[list[QueueEntry], int]:
    """Inverse of ``encode_block``: (entries, done mask); ``msgspec.DecodeError`` if bad.
    ``origins`` gives the origin of a referrer's host id (None: unknown)."""
    return _decode_block(host.encode("utf-8"), value, origins)


def _decode_block(
    host: bytes, value: bytes, origins: RefOrigins | None
) -> tuple[list[QueueEntry], int]:
    mask, raws = _raw_items(value)
    return [_entry(host, _item_decoder.decode(raw), origins) for raw in raws], mask


def _raw_items(value: bytes) -> tuple[int, list[msgspec.Raw]]:
    """(done mask, undecoded items) of a block value: a reader that wants a few entries of a
    block decodes only those (a refill often takes one)."""
    if len(value) < 3 or not 0 < value[0] <= BLOCK_MAX:
        raise msgspec.DecodeError("bad queue block header")
    n, mask = block_header(value)
    payload = value[2 + (n + 7) // 8 :]
    if value[1] & _ZLIB:
        try:
            payload = zlib.decompress(payload, -15)
        except zlib.error as exc:
            raise msgspec.DecodeError(f"bad queue block payload: {exc}") from exc
    items = _raw_decoder.decode(payload)
    if len(items) != n:
        raise msgspec.DecodeError(f"queue block holds {len(items)} items, header says {n}")
    return mask, items


def _shared_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b``: the first differing byte is
    the highest set byte of their XOR as big-endian integers (a few C-level operations)."""
    n = min(len(a), len(b))
    diff = int.from_bytes(a[:n], "big") ^ int.from_bytes(b[:n], "big")
    return n - 1 - (diff.bit_length() - 1) // 8 if diff else n


# ------------------------------------------------------------------------------ the store


@dataclass(slots=True, eq=False)
class _Block:
    """A block with entries held in memory, or written by the open transaction."""

    key: bytes
    origin: str
    n: int
    mask: int = 0  #: done entries (newer than the stored mask)
    held: int = 0  #: mask of the entries held in memory (hot, in flight or waiting to retry)
    entries: list[QueueEntry] | None = None  #: not yet written (an open block) if not None
    in_done: bool = False  #: ``b"done"`` may hold a mask for it (delete it with the block)

    @property
    def full(self) -> int:
        return (1 << self.n) - 1


class QueueStore:
    """Every host's queue in the ``b"queue"`` database of ``env`` (layout: module docstring).

    Construct it before opening a write transaction on ``env`` (it opens its databases). The
    methods that read or write take the caller's transaction; the caller must call ``flush``
    before each commit, then ``committed`` after it (or ``aborted``).
    """

    def __init__(self, env: lmdb.Environment, ref_host: RefHosts | None = None) -> None:
        self._ref_host = ref_host
        self._origin_cache: dict[int, bytes] = {}  #: host id -> origin, for referrers
        self._db = env.open_db(b"queue")
        self._done_db = env.open_db(b"done")
        self._hosts_db = env.open_db(b"hosts")
        self._meta = env.open_db(b"meta")
        self._counts_db = env.open_db(b"counts")
        with env.begin() as txn:
            raw = txn.get(_HWM_KEY, db=self._meta)
            raw_hosts = txn.get(_HOST_HWM_KEY, db=self._meta)
            counted = txn.get(_COUNTS_KEY, db=self._meta) is not None
            queued = txn.stat(self._db)["entries"] > 0
        #: the counts marker is still to be written (by the first commit: the queue is empty)
        self._mark_counts = not counted and not queued
        if not counted and queued:
            self._count_all(env)
        hwm = _U64.unpack(raw)[0] if raw is not None else 0
        self._next_seq = hwm + 1
        self._reserved_upto = hwm
        self._reserved_in: lmdb.Transaction | None = None
        self._next_host = _U32.unpack(raw_hosts)[0] + 1 if raw_hosts is not None else 0
        self._unmapped: dict[int, str] = {}  #: host ids not yet committed to ``hosts``
        self._blocks: dict[bytes, _Block] = {}  #: by block key
        self._open: dict[tuple[int, int], _Block] = {}  #: (host id, rank) -> its last open block
        self._unwritten: list[_Block] = []  #: every open block, in creation order
        self._unwritten_of: dict[int, list[_Block]] = {}  #: open blocks by host id
        self._dirty: dict[bytes, _Block] = {}  #: written blocks whose mask changed
        #: host id (u32 bytes) -> entries of stored blocks finished in this transaction (< 0)
        self._count_delta: dict[bytes, int] = {}
        self._queue_cursor: lmdb.Cursor[bytes] | None = None  #: see ``_cursor``
        self._cursor_txn: lmdb.Transaction[bytes] | None = None

    @property
    def next_seq(self) -> int:
        """The seq the next block will use."""
        return self._next_seq

    @property
    def tracked(self) -> int:
        """Blocks the store keeps a record of (open, or with entries held in memory)."""
        return len(self._blocks)

    # -------------------------------------------------------------------------- hosts

    def host_id(self, txn: lmdb.Transaction, origin: str) -> int:
        """The id of ``origin``; a new one is written by the next ``flush``. Ask once per
        origin and remember the answer (a new id is not found here until it is committed)."""
        raw = txn.get(b"o" + origin.encode("ascii"), db=self._hosts_db)
        if raw is not None:
            return int(_U32.unpack(raw)[0])
        host_id = self._next_host
        if host_id > 0xFFFFFFFF:
            raise ValueError("more than 2**32 hosts")
        self._next_host += 1
        self._unmapped[host_id] = origin
        return host_id

    def origin_of(self, txn: lmdb.Transaction, host_id: int) -> str | None:
        """The origin of a host id (None if unknown)."""
        raw = txn.get(b"i" + _U32.pack(host_id), db=self._hosts_db)
        return bytes(raw).decode("ascii") if raw is not None else None

    def _origins(self, txn: lmdb.Transaction) -> RefOrigins:
        """Host id -> origin as ``txn`` sees it (and ids not committed yet), cached."""
        cache = self._origin_cache

        def origin(host_id: int) -> bytes | None:
            known = cache.get(host_id)
            if known is not None:
                return known
            raw = txn.get(b"i" + _U32.pack(host_id), db=self._hosts_db)
            if raw is not None:
                known = bytes(raw)
            elif host_id in self._unmapped:
                return self._unmapped[host_id].encode("ascii")
            else:
                return None
            if len(cache) >= _ORIGIN_CACHE_MAX:
                cache.clear()
            cache[host_id] = known
            return known

        return origin

    # -------------------------------------------------------------------------- writes

    def add(
        self,
        txn: lmdb.Transaction,
        host_id: int,
        origin: str,
        rank: int,
        entry: QueueEntry,
        held: bool,
    ) -> bytes:
        """Append ``entry`` to ``host_id``'s queue at ``rank`` (``rank_of``); returns its entry
        key.

        ``held``: the caller keeps the entry in memory (and will call ``done`` or ``release``
        for it).
        """
        block = self._open.get((host_id, rank))
        if block is None or block.n >= BLOCK_MAX:
            seq = self._next_seq
            if txn is not self._reserved_in or seq > self._reserved_upto:
                self._reserve(txn, seq)
            self._next_seq = seq + 1
            key = encode_key(host_id, rank, seq)
            block = _Block(key, origin, 0, entries=[])
            self._blocks[key] = block
            self._open[(host_id, rank)] = block
            self._unwritten.append(block)
            self._unwritten_of.setdefault(host_id, []).append(block)
        assert block.entries is not None
        index = block.n
        block.entries.append(entry)
        block.n = index + 1
        if held:
            block.held |= 1 << index
        return block.key + bytes((index,))

    def done(self, key: bytes) -> bool:
        """Mark a held entry finished (durable at the next commit); False if unknown or done."""
        block = self._blocks.get(key[:BLOCK_KEY_LEN])
        if block is None or len(key) != BLOCK_KEY_LEN + 1:
            return False
        bit = 1 << key[BLOCK_KEY_LEN]
        if block.mask & bit:
            return False
        block.mask |= bit
        block.held &= ~bit
        if block.entries is None:  # a stored block (an open one is counted when written)
            self._dirty[block.key] = block
            host = key[:4]
            self._count_delta[host] = self._count_delta.get(host, 0) - 1
        return True

    def release(self, key: bytes) -> bool:
        """Give a held, unfinished entry back to LMDB: the caller drops it from memory, and a
        later ``read_after`` past it returns it again. False if it is not held here (an entry
        of a block an aborted transaction dropped: the caller keeps it)."""
        block = self._blocks.get(key[:BLOCK_KEY_LEN])
        if block is None or len(key) != BLOCK_KEY_LEN + 1:
            return False
        bit = 1 << key[BLOCK_KEY_LEN]
        if not block.held & bit or block.mask & bit:
            return False
        block.held &= ~bit
        if not block.held and block.entries is None and block.key not in self._dirty:
            del self._blocks[block.key]  # its mask is all in LMDB: read again when needed
        return True

    def rewrite(self, txn: lmdb.Transaction, key: bytes, entry: QueueEntry) -> bool:
        """Store ``entry`` in place of a held, unfinished entry (a retry); False if absent."""
        block = self._blocks.get(key[:BLOCK_KEY_LEN])
        if block is None or len(key) != BLOCK_KEY_LEN + 1:
            return False
        index = key[BLOCK_KEY_LEN]
        if block.mask >> index & 1 or index >= block.n:
            return False
        if block.entries is not None:
            block.entries[index] = entry
            return True
        raw = txn.get(block.key, db=self._db)
        if raw is None:
            return False
        entries, _ = decode_block(block.origin, bytes(raw), self._origins(txn))
        entries[index] = entry
        value = encode_block(block.origin, entries, block.mask, self._ref_host)
        txn.put(block.key, value, db=self._db)
        # the new value carries the mask, but the block stays dirty: were this transaction
        # aborted, the completions it holds would be lost with the value (and counted)
        return True

    def flush(self, txn: lmdb.Transaction) -> None:
        """Write this transaction's open blocks, changed masks and new host ids to ``txn``.

        In-memory records change only in ``committed``, so a failed commit loses nothing."""
        db = self._db
        if self._unwritten and (txn is not self._reserved_in):
            self._reserve(txn, self._next_seq)
        change = dict(self._count_delta)  # unchanged until committed: a failed commit redoes
        for block in self._unwritten:
            assert block.entries is not None
            if block.mask != block.full:
                value = encode_block(block.origin, block.entries, block.mask, self._ref_host)
                if not txn.put(block.key, value, db=db, overwrite=False):
                    raise RuntimeError(f"queue key {block.key!r} already present: seq reused")
                host = block.key[:4]
                change[host] = change.get(host, 0) + block.n - block.mask.bit_count()
        if self._mark_counts:
            txn.drop(self._counts_db, delete=False)
            txn.put(_COUNTS_KEY, b"1", db=self._meta)
        self._write_counts(txn, change)
        done_db = self._done_db
        for block in self._dirty.values():
            if block.mask == block.full:
                txn.delete(block.key, db=db)
                if block.in_done:
                    txn.delete(block.key, db=done_db)
            else:
                txn.put(block.key, block.mask.to_bytes((block.n + 7) // 8, "little"), db=done_db)
                block.in_done = True
        if self._unmapped:
            hosts = self._hosts_db
            for host_id, origin in self._unmapped.items():
                txn.put(b"o" + origin.encode("ascii"), _U32.pack(host_id), db=hosts)
                txn.put(b"i" + _U32.pack(host_id), origin.encode("ascii"), db=hosts)
            txn.put(_HOST_HWM_KEY, _U32.pack(self._next_host - 1), db=self._meta)

    def committed(self) -> None:
        """The transaction ``flush`` wrote to is committed: forget what no longer needs a record."""
        blocks = self._blocks
        for block in self._unwritten:
            block.entries = None
            if not block.held or block.mask == block.full:
                del blocks[block.key]
        for block in self._dirty.values():
            if not block.held or block.mask == block.full:
                blocks.pop(block.key, None)
        self._open.clear()
        self._unwritten.clear()
        self._unwritten_of.clear()
        self._dirty.clear()
        self._unmapped.clear()
        self._count_delta.clear()
        self._mark_counts = False

    def _write_counts(self, txn: lmdb.Transaction, change: dict[bytes, int]) -> None:
        """Add ``change`` (host id bytes -> entries) to the stored per-host counts, in key
        order through one cursor (LMDB then finds most keys on the page it is on)."""
        with txn.cursor(db=self._counts_db) as cursor:
            for host in sorted(change):
                delta = change[host]
                if not delta:
                    continue
                found = cursor.set_key(host)
                count = (int.from_bytes(cursor.value(), "big") if found else 0) + delta
                if count > 0:
                    cursor.put(host, count.to_bytes(8, "big"))
                elif found:
                    cursor.delete()
                if count < 0:  # cannot happen while every queue write goes through this store
                    log.error("host id %d: queue count below zero (%d), taken as 0",
                              _U32.unpack(host)[0], count)  # fmt: skip

    def _count_all(self, env: lmdb.Environment) -> None:
        """Write every host's count, from one scan of the blocks, and the marker (a state of
        layout 5: module docstring)."""
        with env.begin(write=True) as txn:
            counts = self.scan_host_counts(txn)
            txn.drop(self._counts_db, delete=False)
            for host_id, count in counts.items():
                if count > 0:
                    txn.put(_U32.pack(host_id), count.to_bytes(8, "big"), db=self._counts_db)
            txn.put(_COUNTS_KEY, b"1", db=self._meta)
        log.info("queue counts of %d hosts written (a state of layout 5, once)", len(counts))

    def aborted(self) -> None:
        """The transaction was aborted: its open blocks are dropped (their URLs' seen-set
        entries went with it: a URL is queued in LMDB only with its seen entry), while the
        masks it changed stay pending for the next commit (finished is finished)."""
        for block in self._unwritten:
            self._blocks.pop(block.key, None)
        self._unwritten.clear()
        self._unwritten_of.clear()
        self._open.clear()
        self._reserved_in = None

    # -------------------------------------------------------------------------- reads

    def read_after(
        self,
        txn: lmdb.Transaction[bytes],
        host_id: int,
        origin: str,
        after: bytes | None,
        limit: int,
    ) -> list[tuple[bytes, QueueEntry]]:
        """``host_id``'s unfinished entries with entry key > ``after`` (None: from its head),
        in key order, at most ``limit``, skipping those already held. They become held.

        Open blocks (not yet written) are merged in key order with the stored ones. Only the
        items taken are decoded: with the memory budget full a refill often takes one or two.
        ``txn`` must return bytes (``buffers=False``, the default).
        """
        out: list[tuple[bytes, QueueEntry]] = []
        if limit <= 0:
            return out
        prefix = _U32.pack(host_id)
        start = prefix
        if after is not None and after[:4] == prefix:
            start = after[:BLOCK_KEY_LEN]
        first_after = after[BLOCK_KEY_LEN] if after is not None and len(after) > 13 else -1
        host = origin.encode("utf-8")
        opened = self._unwritten_of.get(host_id)
        pending = sorted((b.key, b) for b in opened if b.key >= start) if opened else []
        cursor = self._cursor(txn)
        stored = cursor.key() if cursor.set_range(start) else b""
        if stored[:4] != prefix:
            stored = b""
        advance = False
        origins: RefOrigins | None = None
        known: _Block | None
        while len(out) < limit:
            if advance:
                advance = False
                stored = cursor.key() if cursor.next() else b""
                if stored[:4] != prefix:
                    stored = b""
            raws: list[msgspec.Raw] = []
            entries: list[QueueEntry] = []
            in_done = False
            if pending and (not stored or pending[0][0] < stored):
                key, known = pending.pop(0)
                assert known.entries is not None
                entries, mask, n = known.entries, known.mask | known.held, known.n
            elif stored:
                key, advance = stored, True
                mask, raws = _raw_items(cursor.value())
                n = len(raws)
                known = self._blocks.get(key)
                if known is not None:
                    mask = known.mask | known.held
                else:
                    done = txn.get(key, db=self._done_db)
                    if done is not None:
                        mask |= int.from_bytes(done, "little")
                        in_done = True
            else:
                break
            skip = first_after if key == start else -1
            wanted = [i for i in range(skip + 1, n) if not mask >> i & 1][: limit - len(out)]
            if not wanted:
                continue
            if raws:
                if origins is None:
                    origins = self._origins(txn)
                decode = _item_decoder.decode
                out += [(key + bytes((i,)), _entry(host, decode(raws[i]), origins)) for i in wanted]
            else:
                out += [(key + bytes((i,)), entries[i]) for i in wanted]
            if known is None:
                known = self._blocks[key] = _Block(key, origin, n, mask, in_done=in_done)
            held = known.held
            for i in wanted:
                held |= 1 << i
            known.held = held
        return out

    def _cursor(self, txn: lmdb.Transaction[bytes]) -> lmdb.Cursor[bytes]:
        """A cursor on the queue database in ``txn``, kept for the transaction's life."""
        if txn is not self._cursor_txn or self._queue_cursor is None:
            self._queue_cursor = txn.cursor(db=self._db)
            self._cursor_txn = txn
        return self._queue_cursor

    def host_counts(self, txn: lmdb.Transaction[bytes]) -> dict[int, int]:
        """Unfinished entries per host id with any (for a restart), as stored in
        ``b"counts"``: one entry per host, no block read (module docstring)."""
        unpack = _U32.unpack
        with txn.cursor(db=self._counts_db) as cursor:
            return {
                unpack(host)[0]: int.from_bytes(count, "big") for host, count in cursor.iternext()
            }

    def queued_hosts(self, txn: lmdb.Transaction[bytes]) -> list[tuple[int, str | None, int]]:
        """(host id, origin or None if unknown, unfinished entries) of every host with any,
        by host id: ``host_counts`` and ``origin_of`` in one pass (``iter_queued_hosts``)."""
        return list(self.iter_queued_hosts(txn))

    def iter_queued_hosts(
        self, txn: lmdb.Transaction[bytes]
    ) -> Iterator[tuple[int, str | None, int]]:
        """``queued_hosts`` one host at a time, while ``txn`` is open (a restart builds each
        host as it comes: no list of 10^6 tuples held beside the hosts). Both databases are
        sorted by host id, so the origins are read by walking a cursor along the counts (a
        ``set_range`` only where hosts without queued URLs lie between)."""
        unpack = _U32.unpack
        from_bytes = int.from_bytes
        with txn.cursor(db=self._counts_db) as counts, txn.cursor(db=self._hosts_db) as hosts:
            key = hosts.key() if hosts.set_range(b"i") else b""
            for host, count in counts.iternext():
                target = b"i" + host
                if key != target:
                    key = hosts.key() if hosts.set_range(target) else b""
                origin: str | None = None
                if key == target:
                    origin = hosts.value().decode("ascii")
                    key = hosts.key() if hosts.next() else b""
                yield unpack(host)[0], origin, from_bytes(count, "big")

    def scan_host_counts(self, txn: lmdb.Transaction[bytes]) -> dict[int, int]:
        """Unfinished entries per host id, in one scan of the blocks (for a state of layout
        5, and to check ``host_counts``).

        The scan is the restart's cost (a block per host per transaction that queued URLs
        for it: tens of millions at 10^8 URLs), so its loop does the least per block: a
        host's blocks are adjacent (keys start with its id), so the count is summed in a
        local and stored once per host; a mask of one byte (blocks of up to 8 URLs) is
        counted by table; ``b"done"`` (a few thousand masks) is asked only if not empty."""
        counts: dict[bytes, int] = {}
        with txn.cursor(db=self._done_db) as cursor:
            done = {key: int.from_bytes(value, "little") for key, value in cursor.iternext()}
        pop = _POPCOUNT
        prefix = b""
        total = 0
        with txn.cursor(db=self._db) as cursor:
            for key, value in cursor.iternext():
                n = value[0]
                if n <= 8:
                    mask_byte = value[2] | done.get(key, 0) if done else value[2]
                    left = n - pop[mask_byte]
                else:
                    mask = int.from_bytes(value[2 : 2 + (n + 7) // 8], "little")
                    if done:
                        mask |= done.get(key, 0)
                    left = n - mask.bit_count()
                if prefix and key.startswith(prefix):
                    total += left
                    continue
                if prefix:
                    counts[prefix] = counts.get(prefix, 0) + total
                prefix = key[:4]
                total = left
        if prefix:
            counts[prefix] = counts.get(prefix, 0) + total
        unpack = _U32.unpack
        return {unpack(host)[0]: count for host, count in counts.items()}

    def callback_counts(self, txn: lmdb.Transaction[bytes]) -> dict[str, int]:
        """Unfinished entries per spider callback name ("": the default), in one scan of the
        stored blocks (a start-up check; every item decoded)."""
        counts: dict[str, int] = {}
        with txn.cursor(db=self._done_db) as cursor:
            done = {key: int.from_bytes(value, "little") for key, value in cursor.iternext()}
        with txn.cursor(db=self._db) as cursor:
            for key, value in cursor.iternext():
                mask, raws = _raw_items(value)
                mask |= done.get(key, 0)
                for i, raw in enumerate(raws):
                    if not (mask >> i) & 1:
                        name = _item_decoder.decode(raw).callback
                        counts[name] = counts.get(name, 0) + 1
        return counts

    def blocks(self, txn: lmdb.Transaction) -> int:
        """Blocks in the queue database (from LMDB's statistics, no scan)."""
        return int(txn.stat(self._db)["entries"])

    def _reserve(self, txn: lmdb.Transaction, seq: int) -> None:
        """Persist a high-water mark covering ``seq`` in ``txn``."""
        upto = max(seq + SEQ_BLOCK - 1, self._reserved_upto)
        txn.put(_HWM_KEY, _U64.pack(upto), db=self._meta)
        self._reserved_upto = upto
        self._reserved_in = txn
