"""The seen-set: which canonical URLs were ever admitted, exactly, with a Bloom filter in front.

Keys are 16-byte URL digests (``urls.url_digest``). Three layers answer ``add_new``:

1. A recent-digest cache (two generations of sets, ``recent_size`` digests at most) routes the
   repeats that dominate link streams (navigation links) around the Bloom filter. It is a hint,
   never trusted on its own: a hit is confirmed by one LMDB ``get`` (so a digest whose write
   transaction was aborted is not lost).
2. The Bloom filter (:class:`DigestBloomFilter`, see below). Its "no" is trusted: the digest is
   new; it is written to LMDB with ``overwrite=False``, which costs the same as a plain put and
   would still catch a Bloom filter out of step with LMDB (``bloom_misses``). Its "maybe" is
   checked exactly in LMDB (the same ``overwrite=False`` put): absent means a false positive,
   counted in ``rescued_false_positives``, stored, and answered "new". A false positive
   therefore never drops a URL; the false-positive rate only costs exact LMDB checks.
3. The exact set: the LMDB named database ``b"seen"``, written in the caller's transaction. It
   is append-only. A digest is stored as the pair (its first 4 bytes, the other 12) of a
   ``dupsort``/``dupfixed`` database: ``url_digest`` starts with a hash of the host, so the key
   is the host and the values are the host's URL hashes, kept by LMDB as packed sorted arrays
   of 12-byte items (``LEAF2`` pages: no per-item node header or pointer). That is ~12 bytes
   of leaf per URL plus one node per host, instead of ~26 for a 16-byte key per URL.

Bit offsets. :class:`DigestBloomFilter` is pybloom-live's ``BloomFilter`` (its sizing: ``k``
slices of ``m`` bits from ``capacity`` and ``error_rate``; its ``bitarray`` storage; its
``tofile``/``fromfile``) with one change: the ``k`` bit offsets come from the digest we already
have instead of pybloom-live's salted SHA-512 passes. The digest is uniformly distributed
(BLAKE2b), so its two little-endian 64-bit halves give ``h1 = lo mod m`` and ``h2 = hi mod m``
(``h2 = 1`` if 0), and slice ``i`` uses bit ``(h1 + i*h2) mod m`` (double hashing, Kirsch and
Mitzenmacher 2006: the same asymptotic false-positive rate as ``k`` independent hashes). With
``url_digest``'s layout (4 bytes of host hash, then 12 of URL hash) ``h2`` holds 64 bits of URL
hash and ``h1`` 32, which spread the URLs of one host over every bit while ``m`` < 2**31 (a
capacity of 1.5e9 per worker). The offsets are computed by C-level ``map`` over a ``range`` and
tested and set with bitarray's index-list access: about 4 us per test-and-set instead of
pybloom-live's 15 (capacity 10^7, error 1e-7, k = 24; much of the rest is 24 cache misses).
The one cost of double hashing is a floor from keys that share ``(h1, h2)``: about ``n / m**2``
per query after ``n`` inserts, ``0.5 / capacity`` at capacity (5e-8 at 10^7 URLs, 5e-10 at
10^9), added to ``estimated_false_positives``; it only costs exact checks. Snapshots made with
pybloom-live's own hashing are refused (a new magic), so the caller rebuilds once.

The Bloom filter keeps accepting digests past its capacity (pybloom-live's own ``add`` would
raise ``IndexError``): its false-positive rate climbs, which only costs exact checks.

Expected false positives (``expected_false_positives``): the filter has ``k`` slices of ``m``
bits and a key sets one bit per slice. After ``x`` inserts a slice's fill is
``F(x) = 1 - exp(-x/m)`` and a new key is a false positive with probability ``F(x)**k``. Over
the ``n`` inserts so far::

    E(n) = integral_0^n (1 - exp(-x/m))**k dx = m * sum_{j>k} F(n)**j / j

(substitute ``u = F(x)``, ``dx = m du / (1 - u)``). The series is summed directly while
``F < 0.9`` and as ``n - m * sum_{j<=k} F**j / j`` above (both are exact; each is the
numerically stable one in its range). ``SeenSet.estimated_false_positives`` adds the double-
hashing floor ``n**2 / (2 m**2)``.

Restart without a full rebuild. Every digest stored in ``b"seen"`` is also appended, in the
same transaction, to the LMDB database ``b"seen_recent"`` (key: a u64 big-endian sequence
number ``seq`` from an in-memory counter that only grows; value: up to ``LOG_CHUNK`` digests,
concatenated). ``add_new`` collects the transaction's new digests and ``flush(txn)``, which the
caller runs just before each commit, appends them (so a transaction costs one put per
``LOG_CHUNK`` new URLs, not one per URL); a transaction that commits without its ``flush``
leaves digests in ``b"seen"`` that the log lacks, and the next load then fails the count check
below and rebuilds: slower, never wrong. ``save_snapshot``:

1. flushes ``T``'s collected digests, then reads, in that write transaction ``T`` (the
   caller's, or its own), the seen count ``C`` and the next ``seq`` ``S``: every digest
   counted in ``C`` is in the in-memory filter, and every digest stored later gets a
   ``seq >= S``;
2. writes the filter with the header ``(C, S)`` to a temporary file, fsyncs it and renames it
   over the snapshot (then fsyncs the directory);
3. deletes the ``seen_recent`` entries with ``seq < S`` in ``T``; they are in the file.

``load_snapshot(path, expected_count)`` loads the file, counts the ``seen_recent`` entries with
``seq >= S`` (``after``) and accepts the snapshot only if ``C + after == expected_count``; it then
sets the bits of every ``seen_recent`` digest. Why this is exact:

* ``b"seen"`` is append-only and each insert's digest is written to exactly one ``seen_recent``
  entry in the same transaction, so the digests stored since the snapshot are exactly those
  with ``seq >= S``, unless entries ``>= S`` were deleted, which only step 3 of a *later*
  snapshot does, after its own file replaced this one. Hence, for the current file,
  ``after`` = inserts since it and ``C + after == exact count``; for a stale file (older
  snapshot, or one whose transaction ``T`` aborted, or an LMDB that lost its last
  transactions in a power cut) ``after`` falls short or ``C`` exceeds, the equation fails and
  the caller rebuilds.
* A kill between steps 2 and 3 leaves the new file and the not-yet-deleted entries ``< S``:
  they are ignored in the count and their bits, already in the file, are set again. Setting a
  Bloom bit twice is idempotent, so the loaded filter is the same. A kill before step 2's rename
  leaves the previous file, whose ``S`` is smaller, and every entry after it (nothing was
  deleted): it loads.
* The counter starts above the largest ``seq`` in ``seen_recent`` and above the ``S`` of any
  snapshot header read, so a later insert never gets a ``seq`` below a snapshot's ``S``.

``seen_recent`` holds one checkpoint interval of inserts (~16 bytes each, appended in order:
LMDB fills its pages completely), and loading it costs one interval's digests, not a rebuild.
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import math
import os
import struct
from collections.abc import Iterator
from itertools import repeat
from operator import add, mod, sub
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from pybloom_live import BloomFilter

from frontier_crawl.safefs import create_fresh, open_regular

if TYPE_CHECKING:
    import lmdb

__all__ = ["LOG_CHUNK", "DigestBloomFilter", "SeenSet", "expected_false_positives"]

log = logging.getLogger(__name__)

_SNAPSHOT_MAGIC = b"FCSEEN02"  # 01: pybloom-live's own hashing, no seen_recent position
_SNAPSHOT_HEADER = struct.Struct("<8sQQdQ")  # magic, count, capacity, error_rate, next seq
#: pybloom-live's ``tofile`` header, then the filter's bytes: error_rate, slices, bits per
#: slice, capacity, count
_BLOOM_HEADER = struct.Struct(BloomFilter.FILE_FMT.decode("ascii"))
_DEFAULT_RECENT_SIZE = 65_536
_DIGEST_HALVES = struct.Struct("<QQ")
_SEQ = struct.Struct(">Q")
_READ_CHUNK = 1 << 24  # the bits are read in place, 16 MiB per readinto
LOG_CHUNK = 120
"""Most digests in one ``seen_recent`` value (1,920 bytes: two values fit a 4 KiB page)."""


def expected_false_positives(inserts: int, bits_per_slice: int, slices: int) -> float:
    """Expected false positives over ``inserts`` inserts (module docstring formula)."""
    if inserts <= 0:
        return 0.0
    m = float(bits_per_slice)
    fill = -math.expm1(-inserts / m)
    if fill >= 0.9:
        head = sum(fill**j / j for j in range(1, slices + 1))
        return max(0.0, inserts - m * head)
    total, j = 0.0, slices + 1
    term = fill**j / j
    while term > total * 1e-17 and term > 0.0:
        total += term
        j += 1
        term = fill**j / j
    return m * total


class DigestBloomFilter(BloomFilter):  # type: ignore[misc]  # pybloom-live is untyped
    """pybloom-live's ``BloomFilter`` whose bit offsets come from a 16-byte digest.

    Sizing, storage and ``tofile``/``fromfile`` are pybloom-live's; ``in`` and ``add`` work
    as there, with the offsets of :meth:`bit_indexes` (module docstring). A key that is not a
    16-byte ``bytes`` is first reduced to its 16-byte BLAKE2b digest.
    """

    def _setup(
        self, error_rate: float, num_slices: int, bits_per_slice: int, capacity: int, count: int
    ) -> None:
        super()._setup(error_rate, num_slices, bits_per_slice, capacity, count)
        self.make_hashes = self._slice_offsets
        self._slice_starts = list(range(0, num_slices * bits_per_slice, bits_per_slice))
        self._m_forever = repeat(bits_per_slice)  # map() stops at the shorter input

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup(
            self.error_rate, self.num_slices, self.bits_per_slice, self.capacity, self.count
        )

    def copy(self) -> DigestBloomFilter:
        new = type(self)(self.capacity, self.error_rate)
        new.bitarray = self.bitarray.copy()
        new.count = self.count
        return new

    def bit_indexes(self, digest: bytes) -> list[int]:
        """The ``k`` bit positions (one per slice) of a 16-byte digest."""
        h1, h2 = _DIGEST_HALVES.unpack(digest)
        m = self.bits_per_slice
        h1 %= m
        h2 = h2 % m or 1
        return list(
            map(
                add,
                self._slice_starts,
                map(mod, range(h1, h1 + self.num_slices * h2, h2), self._m_forever),
            )
        )

    def _slice_offsets(self, key: object) -> Iterator[int]:
        """pybloom-live's ``make_hashes`` contract: the offset within each slice."""
        return map(sub, self.bit_indexes(_as_digest(key)), self._slice_starts)


def _as_digest(key: object) -> bytes:
    if isinstance(key, bytes) and len(key) == _DIGEST_HALVES.size:
        return key
    data = key if isinstance(key, bytes) else str(key).encode("utf-8")
    return hashlib.blake2b(data, digest_size=_DIGEST_HALVES.size).digest()


class SeenSet:
    """Exact set of URL digests in LMDB, fronted by a Bloom filter and a recent cache.

    ``recent_size`` bounds the recent-digest cache (two generations of half that size, about
    110 bytes a digest; 0 disables it). Construct the set before opening a write transaction on
    ``env`` (it opens the ``b"seen"`` and ``b"seen_recent"`` databases). All methods run on the
    caller's thread and transactions. After an aborted write transaction the Bloom filter and
    ``count`` still include its digests: harmless (the Bloom filter's answers are checked in
    LMDB, and a snapshot records LMDB's own count).
    """

    def __init__(
        self,
        env: lmdb.Environment,
        capacity: int,
        error_rate: float,
        *,
        recent_size: int = _DEFAULT_RECENT_SIZE,
    ) -> None:
        self._env = env
        self._db = env.open_db(b"seen", dupsort=True, dupfixed=True)
        self._log_db = env.open_db(b"seen_recent")
        self._capacity = capacity
        self._error_rate = error_rate
        self._bloom = DigestBloomFilter(capacity, error_rate)
        self._half_recent = recent_size // 2
        self._recent: set[bytes] = set()
        self._recent_old: set[bytes] = set()
        with env.begin() as txn:
            self._count = self.exact_count(txn)
            with txn.cursor(db=self._log_db) as cursor:
                last = cursor.key() if cursor.last() else None
        self._next_seq = _SEQ.unpack(last)[0] + 1 if last else 0
        self.maybe_answers = 0
        self.rescued_false_positives = 0
        self.recent_hits = 0
        self.bloom_misses = 0
        self._warned_full = False
        self._logging: list[bytes] = []  #: new digests of the open transaction (see flush)
        self._cursor: lmdb.Cursor | None = None  #: for ``contains``, valid in ``_cursor_txn``
        self._cursor_txn: lmdb.Transaction | None = None

    # -------------------------------------------------------------------------- queries

    @property
    def count(self) -> int:
        """Distinct digests stored (this process's view, uncommitted writes included)."""
        return self._count

    @property
    def bloom(self) -> DigestBloomFilter:
        """The Bloom filter (for tests and diagnostics)."""
        return self._bloom

    def add_new(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """Record ``digest``; True if it was never seen before. ``txn`` must be a write txn."""
        if self._recent_hit(txn, digest):
            return False
        maybe = self._bloom_test_and_set(digest)
        inserted = bool(txn.put(digest[:4], digest[4:], db=self._db, dupdata=False))
        if maybe:
            self.maybe_answers += 1
            self.rescued_false_positives += inserted
        elif not inserted:
            self.bloom_misses += 1
        if inserted:
            self._logging.append(digest)
        self._remember(digest)
        self._count += inserted
        return inserted

    def contains(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """Exact membership (one LMDB lookup: cheaper than asking the Bloom filter first)."""
        if txn is not self._cursor_txn or self._cursor is None:
            self._cursor = txn.cursor(db=self._db)
            self._cursor_txn = txn
        return bool(self._cursor.set_key_dup(digest[:4], digest[4:]))

    def exact_count(self, txn: lmdb.Transaction) -> int:
        """Entries of the LMDB seen database as ``txn`` sees them."""
        return int(txn.stat(self._db)["entries"])

    def recent_count(self, txn: lmdb.Transaction) -> int:
        """Digests in ``seen_recent`` (stored since the last snapshot, or a few more): a scan."""
        with txn.cursor(db=self._log_db) as cursor:
            return sum(len(v) for v in cursor.iternext(keys=False, values=True)) // 16

    def flush(self, txn: lmdb.Transaction) -> None:
        """Append the digests ``add_new`` stored in ``txn`` to ``seen_recent``: call it just
        before committing ``txn`` (module docstring)."""
        pending = self._logging
        if not pending:
            return
        for start in range(0, len(pending), LOG_CHUNK):
            key = _SEQ.pack(self._next_seq)
            self._next_seq += 1
            value = b"".join(pending[start : start + LOG_CHUNK])
            if not txn.put(key, value, db=self._log_db, append=True):
                txn.put(key, value, db=self._log_db)  # unreachable: seqs only grow
        pending.clear()

    def aborted(self) -> None:
        """The transaction ``add_new`` wrote to was aborted: its digests are not in LMDB."""
        self._logging.clear()

    def estimated_false_positives(self) -> float:
        """Expected Bloom false positives over the inserts so far (see module docstring)."""
        bloom = self._bloom
        m: int = bloom.bits_per_slice
        n = self._count
        floor = n * n / (2.0 * m * m)  # double hashing (module docstring)
        return expected_false_positives(n, m, bloom.num_slices) + floor

    def stats(self) -> dict[str, float | int]:
        """Counters for the report."""
        return {
            "capacity": self._capacity,
            "error_rate": self._error_rate,
            "count": self._count,
            "estimated_false_positives": self.estimated_false_positives(),
            "rescued_false_positives": self.rescued_false_positives,
            "bloom_bytes": (self._bloom.num_bits + 7) // 8,
            #: the fraction of the filter's bits set (each slice alike): 1 - e^(-n/m)
            "bloom_fill": -math.expm1(-self._count / self._bloom.bits_per_slice),
            "maybe_answers": self.maybe_answers,
            "recent_hits": self.recent_hits,
            "bloom_misses": self.bloom_misses,
        }

    # -------------------------------------------------------------------------- restart

    def rebuild(self, txn: lmdb.Transaction[bytes]) -> int:
        """Refill a fresh Bloom filter from every digest in LMDB; returns how many."""
        bloom = self._bloom  # cleared in place: never a second filter in memory
        bits = bloom.bitarray
        bits.setall(0)
        self._clear_recent()
        indexes = bloom.bit_indexes
        count = 0
        with txn.cursor(db=self._db) as cursor:
            for host, rest in cursor.iternext():
                bits[indexes(host + rest)] = 1
                count += 1
        bloom.count = count
        self._count = count
        return count

    def save_snapshot(self, path: Path, txn: lmdb.Transaction | None = None) -> None:
        """Write the Bloom filter, the seen count and the ``seen_recent`` position atomically
        (tmp, fsync, rename), then forget the ``seen_recent`` entries the file holds.

        ``txn``: the caller's open write transaction, if it has one (LMDB allows one writer
        at a time and this method needs to write); without it the method uses its own. Safe
        against a kill at any point (module docstring).
        """
        if txn is None:
            with self._env.begin(write=True) as own:
                self._save_snapshot(path, own)
        else:
            self._save_snapshot(path, txn)

    def _save_snapshot(self, path: Path, txn: lmdb.Transaction) -> None:
        self.flush(txn)
        count = self.exact_count(txn)
        upto = self._next_seq
        header = _SNAPSHOT_HEADER.pack(
            _SNAPSHOT_MAGIC, count, self._capacity, self._error_rate, upto
        )
        tmp = path.with_name(path.name + ".tmp")
        # refused before any of it is written where it cannot fit: written until the disk is
        # full, it would take every free byte for a moment, and the crawl's other writers
        # (the WARC writer's process) fail in that moment
        room = os.statvfs(path.parent)
        if room.f_bavail * room.f_frsize < len(header) + self.stats()["bloom_bytes"] + 4096:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))
        try:
            # a fresh file: a leftover, or a symbolic link planted there, is removed first
            with os.fdopen(create_fresh(tmp, 0o600), "wb") as f:
                f.write(header)
                self._bloom.tofile(f)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            tmp.unlink(missing_ok=True)  # a full disk: do not leave a partial copy taking room
            raise OSError(exc.errno, exc.strerror, str(tmp)) from exc
        os.replace(tmp, path)
        _fsync_dir(path.parent)
        self._forget_logged(txn, upto)

    def load_snapshot(
        self, path: Path, expected_count: int, txn: lmdb.Transaction | None = None
    ) -> bool:
        """Load a snapshot if, with the ``seen_recent`` entries after it, it accounts for
        exactly ``expected_count`` digests and has this set's sizing; else False (the caller
        rebuilds). ``txn``: a transaction to read LMDB in (default: a read transaction).

        The bits are read straight into this set's own filter (``readinto`` its buffer), after
        every check that needs no bits: a restart holds one filter, never two (a second copy
        was the reopen's memory peak). A file that fails while its bits are read leaves the
        filter cleared (a clear filter over a full LMDB stays exact: its answers are checked
        there), and the caller rebuilds."""
        if txn is None:
            with self._env.begin() as own:
                return self._load_snapshot(path, expected_count, own)
        return self._load_snapshot(path, expected_count, txn)

    def _load_snapshot(self, path: Path, expected_count: int, txn: lmdb.Transaction) -> bool:
        bloom = self._bloom
        bits = bloom.bitarray
        nbytes = (bloom.num_bits + 7) // 8
        try:
            with open_regular(path) as f:  # a link, a FIFO...: not usable, rebuilt
                magic, count, capacity, error_rate, upto = _SNAPSHOT_HEADER.unpack(
                    f.read(_SNAPSHOT_HEADER.size)
                )
                if magic != _SNAPSHOT_MAGIC:
                    return False
                # never hand out a seq below a snapshot's position, even if it is refused
                self._next_seq = max(self._next_seq, upto)
                if (capacity, error_rate) != (self._capacity, self._error_rate):
                    return False
                if count > expected_count:
                    return False
                _, slices, bits_per_slice, _, _ = _BLOOM_HEADER.unpack(f.read(_BLOOM_HEADER.size))
                if (slices, bits_per_slice) != (bloom.num_slices, bloom.bits_per_slice):
                    return False
                if os.fstat(f.fileno()).st_size - f.tell() != nbytes:
                    log.info("seen snapshot %s: its bits are not %d bytes", path, nbytes)
                    return False
                logged = self._logged_since(upto, count, expected_count, txn)
                if logged is None:
                    return False
                try:
                    _read_exactly(f, bits, nbytes)
                except BaseException:
                    bits.setall(0)  # part old, part file: neither
                    bloom.count = 0
                    raise
        except (OSError, EOFError, ValueError, OverflowError, struct.error) as exc:
            log.info("seen snapshot %s not usable: %s", path, exc)
            return False
        indexes = bloom.bit_indexes
        for digest in logged:  # those before ``upto`` are in the file already: idempotent
            bits[indexes(digest)] = 1
        bloom.count = expected_count
        self._count = expected_count
        self._clear_recent()
        return True

    def _logged_since(
        self, upto: int, count: int, expected_count: int, txn: lmdb.Transaction
    ) -> list[bytes] | None:
        """Every ``seen_recent`` digest, if the snapshot's ``count`` plus those with a
        ``seq >= upto`` make ``expected_count`` (module docstring); None if not."""
        after = 0
        logged: list[bytes] = []
        with txn.cursor(db=self._log_db) as cursor:
            for key, value in cursor.iternext():
                digests = bytes(value)
                chunk = [digests[i : i + 16] for i in range(0, len(digests), 16)]
                if _SEQ.unpack(key)[0] >= upto:
                    after += len(chunk)
                logged += chunk
        if count + after != expected_count:
            log.info(
                "seen snapshot holds %d digests, %d stored since, LMDB has %d: stale",
                count,
                after,
                expected_count,
            )
            return None
        return logged

    # -------------------------------------------------------------------------- internals

    def _forget_logged(self, txn: lmdb.Transaction, upto: int) -> None:
        """Delete the ``seen_recent`` entries with ``seq < upto``: all of them, since ``upto``
        was the next seq when the snapshot was taken and nothing was stored since (and were
        one dropped that is not in the file, a later load would count too few and refuse)."""
        del upto
        txn.drop(self._log_db, delete=False)

    def _recent_hit(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """A recently seen digest, confirmed in LMDB (skips the Bloom filter)."""
        if digest not in self._recent and digest not in self._recent_old:
            return False
        if not self.contains(txn, digest):  # its transaction was aborted
            return False
        self.recent_hits += 1
        self._remember(digest)
        return True

    def _remember(self, digest: bytes) -> None:
        """Put a digest in the young generation; age the generations when it is full."""
        if not self._half_recent:
            return
        recent = self._recent
        recent.add(digest)
        if len(recent) >= self._half_recent:
            self._recent_old = recent
            self._recent = set()

    def _clear_recent(self) -> None:
        self._recent = set()
        self._recent_old = set()

    def _bloom_test_and_set(self, digest: bytes) -> bool:
        """Set ``digest``'s bits; True if they were all set already (a Bloom "maybe").

        One pass instead of ``in`` then ``add``, and no capacity limit.
        """
        bloom = self._bloom
        indexes = bloom.bit_indexes(digest)
        bits = bloom.bitarray
        if bits[indexes].all():
            return True
        bits[indexes] = 1
        bloom.count += 1
        if bloom.count > self._capacity and not self._warned_full:
            self._warned_full = True
            log.warning(
                "seen Bloom filter past its capacity %d: raise seen_capacity", self._capacity
            )
        return False


def _read_exactly(f: BinaryIO, bits: Any, nbytes: int) -> None:
    """Fill the bitarray ``bits`` (``nbytes`` long) from ``f`` in place; EOFError if short."""
    reader = cast("io.BufferedIOBase", f)  # open_regular's: a BufferedReader
    with memoryview(bits) as view:
        done = 0
        while done < nbytes:
            got = reader.readinto(view[done : done + _READ_CHUNK])
            if not got:
                raise EOFError(f"snapshot ends after {done} of {nbytes} bytes of bits")
            done += got


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
