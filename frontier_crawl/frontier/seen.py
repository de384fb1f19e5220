"""The seen-set: which canonical URLs were ever admitted, exactly, with a Bloom filter in front.

Keys are 16-byte URL digests (``urls.url_digest``). Three layers answer ``add_new``:

1. A recent-digest cache (two generations of sets, ``recent_size`` digests at most) routes the
   repeats that dominate link streams (navigation links) around the Bloom filter. It is a hint,
   never trusted on its own: a hit is confirmed by one LMDB ``get`` (so a digest whose write
   transaction was aborted is not lost).
2. The Bloom filter (``pybloom_live.BloomFilter(capacity, error_rate)``). Its "no" is trusted:
   the digest is new; it is written to LMDB with ``overwrite=False``, which costs the same as a
   plain put and would still catch a Bloom filter out of step with LMDB (``bloom_misses``).
   Its "maybe" is checked exactly in LMDB (the same ``overwrite=False`` put): absent means a
   false positive, counted in ``rescued_false_positives``, stored, and answered "new".
   A false positive therefore never drops a URL.
3. The exact set: the LMDB named database ``b"seen"`` (digest -> ``b""``), written in the
   caller's transaction. It is append-only.

The Bloom filter keeps accepting digests past its capacity (pybloom-live's own ``add`` would
raise ``IndexError``): its false-positive rate climbs, which only costs exact checks.

Expected false positives (``estimated_false_positives``): pybloom-live's filter has ``k``
slices of ``m`` bits and a key sets one bit per slice. After ``x`` inserts a slice's fill is
``F(x) = 1 - exp(-x/m)`` and a new key is a false positive with probability ``F(x)**k``. Over
the ``n`` inserts so far::

    E(n) = integral_0^n (1 - exp(-x/m))**k dx = m * sum_{j>k} F(n)**j / j

(substitute ``u = F(x)``, ``dx = m du / (1 - u)``). The series is summed directly while
``F < 0.9`` and as ``n - m * sum_{j<=k} F**j / j`` above (both are exact; each is the
numerically stable one in its range).

Restart: ``save_snapshot`` writes the filter with a header holding the seen database's entry
count; since that database is append-only, a snapshot whose count equals the current count
holds every stored digest and is loaded, any other is refused and the caller calls ``rebuild``.
"""

from __future__ import annotations

import logging
import math
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pybloom_live import BloomFilter

if TYPE_CHECKING:
    import lmdb

__all__ = ["SeenSet", "expected_false_positives"]

log = logging.getLogger(__name__)

_SNAPSHOT_MAGIC = b"FCSEEN01"
_SNAPSHOT_HEADER = struct.Struct("<8sQQd")  # magic, count, capacity, error_rate
_DEFAULT_RECENT_SIZE = 65_536


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


class SeenSet:
    """Exact set of URL digests in LMDB, fronted by a Bloom filter and a recent cache.

    ``recent_size`` bounds the recent-digest cache (two generations of half that size, about
    110 bytes a digest; 0 disables it). Construct the set before opening a write transaction on
    ``env`` (it opens the ``b"seen"`` database). All methods run on the caller's thread and
    transactions. After an aborted write transaction the Bloom filter and ``count`` still
    include its digests: harmless (the Bloom filter's answers are checked in LMDB, and a
    snapshot records LMDB's own count).
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
        self._db = env.open_db(b"seen")
        self._capacity = capacity
        self._error_rate = error_rate
        self._bloom = BloomFilter(capacity, error_rate)
        self._half_recent = recent_size // 2
        self._recent: set[bytes] = set()
        self._recent_old: set[bytes] = set()
        with env.begin() as txn:
            self._count = self.exact_count(txn)
        self.maybe_answers = 0
        self.rescued_false_positives = 0
        self.recent_hits = 0
        self.bloom_misses = 0
        self._warned_full = False

    # -------------------------------------------------------------------------- queries

    @property
    def count(self) -> int:
        """Distinct digests stored (this process's view, uncommitted writes included)."""
        return self._count

    @property
    def bloom(self) -> Any:
        """The ``pybloom_live.BloomFilter`` (for tests and diagnostics)."""
        return self._bloom

    def add_new(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """Record ``digest``; True if it was never seen before. ``txn`` must be a write txn."""
        if self._recent_hit(txn, digest):
            return False
        maybe = self._bloom_test_and_set(digest)
        inserted = bool(txn.put(digest, b"", db=self._db, overwrite=False))
        if maybe:
            self.maybe_answers += 1
            self.rescued_false_positives += inserted
        elif not inserted:
            self.bloom_misses += 1
        self._remember(digest)
        self._count += inserted
        return inserted

    def contains(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """Exact membership (one LMDB get: cheaper than asking the Bloom filter first)."""
        return txn.get(digest, db=self._db) is not None

    def exact_count(self, txn: lmdb.Transaction) -> int:
        """Entries of the LMDB seen database as ``txn`` sees them."""
        return int(txn.stat(self._db)["entries"])

    def estimated_false_positives(self) -> float:
        """Expected Bloom false positives over the inserts so far (see module docstring)."""
        bloom = self._bloom
        return expected_false_positives(self._count, bloom.bits_per_slice, bloom.num_slices)

    def stats(self) -> dict[str, float | int]:
        """Counters for the report."""
        return {
            "capacity": self._capacity,
            "error_rate": self._error_rate,
            "count": self._count,
            "estimated_false_positives": self.estimated_false_positives(),
            "rescued_false_positives": self.rescued_false_positives,
            "bloom_bytes": (self._bloom.num_bits + 7) // 8,
            "maybe_answers": self.maybe_answers,
            "recent_hits": self.recent_hits,
            "bloom_misses": self.bloom_misses,
        }

    # -------------------------------------------------------------------------- restart

    def rebuild(self, txn: lmdb.Transaction[bytes]) -> int:
        """Refill a fresh Bloom filter from every digest in LMDB; returns how many."""
        self._bloom = BloomFilter(self._capacity, self._error_rate)
        self._clear_recent()
        count = 0
        with txn.cursor(db=self._db) as cursor:
            for digest in cursor.iternext(keys=True, values=False):
                self._bloom_test_and_set(digest)
                count += 1
        self._count = count
        return count

    def save_snapshot(self, path: Path) -> None:
        """Write the Bloom filter and the seen count atomically (tmp, fsync, rename)."""
        with self._env.begin() as txn:
            count = self.exact_count(txn)
        header = _SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, count, self._capacity, self._error_rate)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as f:
            f.write(header)
            self._bloom.tofile(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)

    def load_snapshot(self, path: Path, expected_count: int) -> bool:
        """Load a snapshot if it matches ``expected_count`` and the sizing; else False."""
        try:
            with path.open("rb") as f:
                header = f.read(_SNAPSHOT_HEADER.size)
                magic, count, capacity, error_rate = _SNAPSHOT_HEADER.unpack(header)
                if (magic, count, capacity, error_rate) != (
                    _SNAPSHOT_MAGIC, expected_count, self._capacity, self._error_rate
                ):
                    return False
                bloom = BloomFilter.fromfile(f)
        except (OSError, EOFError, ValueError, OverflowError, struct.error) as exc:
            log.info("seen snapshot %s not usable: %s", path, exc)
            return False
        fresh = self._bloom
        if (bloom.num_slices, bloom.bits_per_slice) != (fresh.num_slices, fresh.bits_per_slice):
            return False
        self._bloom = bloom
        self._count = count
        self._clear_recent()
        return True

    # -------------------------------------------------------------------------- internals

    def _recent_hit(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """A recently seen digest, confirmed in LMDB (skips the Bloom filter)."""
        if digest not in self._recent and digest not in self._recent_old:
            return False
        if txn.get(digest, db=self._db) is None:  # its transaction was aborted
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

    def _bloom_test_and_set(self, key: bytes) -> bool:
        """Set ``key``'s bits; True if they were all set already (a Bloom "maybe").

        One hashing pass instead of ``in`` then ``add``, and no capacity limit.
        """
        bloom = self._bloom
        bits = bloom.bitarray
        bits_per_slice = bloom.bits_per_slice
        offset = 0
        present = True
        for h in bloom.make_hashes(key):
            if not bits[offset + h]:
                bits[offset + h] = True
                present = False
            offset += bits_per_slice
        if not present:
            bloom.count += 1
            if bloom.count > self._capacity and not self._warned_full:
                self._warned_full = True
                log.warning("seen Bloom filter past its capacity %d: raise seen_capacity",
                            self._capacity)
        return present


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
