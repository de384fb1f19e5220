"""The seen-set: which canonical URLs were ever admitted, exactly, in LMDB.

Keys are 16-byte URL digests (``urls.url_digest``). Two layers answer ``add_new``:

1. A recent-digest cache (two generations of sets, ``recent_size`` digests at most) answers the
   repeats that dominate link streams (navigation links) with one LMDB lookup instead of a
   write. It is a hint, never trusted on its own: a hit is confirmed by that lookup (so a
   digest whose write transaction was aborted is not lost).
2. The exact set: the LMDB named database ``b"seen"``, written in the caller's transaction. It
   is append-only. A digest is stored as the pair (its first 4 bytes, the other 12) of a
   ``dupsort``/``dupfixed`` database: ``url_digest`` starts with a hash of the host, so the key
   is the host and the values are the host's URL hashes, kept by LMDB as packed sorted arrays
   of 12-byte items (``LEAF2`` pages: no per-item node header or pointer). That is ~12 bytes
   of leaf per URL plus one node per host, instead of ~26 for a 16-byte key per URL.

Why there is no Bloom filter in front. Admitting a new URL needs the put into ``b"seen"``
anyway, and that put, with ``dupdata=False``, is also the membership test: it returns False,
writing nothing, for a digest already stored. A filter's "no" could not skip the put (the put
is the insert) and its "maybe" had to be checked by the same put, so a filter never changed an
answer nor saved an LMDB operation; it only cost a test-and-set per link, memory growing with
the configured capacity, and a snapshot to write at each checkpoint and load at each restart.
Without it the set is exact by construction: nothing is dropped, there is no false-positive
rate to size, and a restart reads nothing but LMDB's own count.

Transactions. ``add_new`` writes into the caller's write transaction; the count it keeps
includes that transaction's inserts. :meth:`SeenSet.committed` and :meth:`SeenSet.aborted`,
called by the frontier after each commit or abort (``txn.Transactions``), keep the count equal
to LMDB's: an aborted transaction's inserts are taken back.

Older state directories: versions with the Bloom filter also kept ``b"seen_recent"`` (the
digests stored since the filter's last snapshot) in the same environment. :class:`SeenSet`
drops it at the first open (one transaction, freeing at most one checkpoint interval of
digests); the snapshot file beside the environment is removed by ``state.StateFiles.open``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lmdb

__all__ = ["RETIRED_LOG_DB", "SeenSet"]

log = logging.getLogger(__name__)

_DEFAULT_RECENT_SIZE = 65_536
#: the named database older versions logged new digests in (see the module docstring)
RETIRED_LOG_DB = b"seen_recent"


class SeenSet:
    """Exact seen-set over LMDB with a recent-digest cache in front (module docstring).

    ``count`` is this process's view of the stored digests, the open transaction's included.
    """

    def __init__(self, env: lmdb.Environment, *, recent_size: int = _DEFAULT_RECENT_SIZE) -> None:
        self._env = env
        self._db = env.open_db(b"seen", dupsort=True, dupfixed=True)
        _drop_retired_log(env)
        self._half_recent = recent_size // 2
        self._recent: set[bytes] = set()
        self._recent_old: set[bytes] = set()
        with env.begin() as txn:
            self._count = self.exact_count(txn)
        self._uncommitted = 0  #: inserts of the open transaction (taken back by ``aborted``)
        self.recent_hits = 0
        self._cursor: lmdb.Cursor | None = None  #: for ``contains``, valid in ``_cursor_txn``
        self._cursor_txn: lmdb.Transaction | None = None

    @property
    def count(self) -> int:
        """Distinct digests stored (this process's view, uncommitted writes included)."""
        return self._count

    def add_new(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """Record ``digest``; True if it was never seen before. ``txn`` must be a write txn."""
        if self._recent_hit(txn, digest):
            return False
        # the insert is the check: a digest already stored is not written again (False)
        inserted = bool(txn.put(digest[:4], digest[4:], db=self._db, dupdata=False))
        self._remember(digest)
        self._count += inserted
        self._uncommitted += inserted
        return inserted

    def contains(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """Exact membership: one LMDB lookup (a cursor kept for ``txn``)."""
        if txn is not self._cursor_txn or self._cursor is None:
            self._cursor = txn.cursor(db=self._db)
            self._cursor_txn = txn
        return bool(self._cursor.set_key_dup(digest[:4], digest[4:]))

    def exact_count(self, txn: lmdb.Transaction) -> int:
        """Entries of the LMDB seen database as ``txn`` sees them."""
        return int(txn.stat(self._db)["entries"])

    def committed(self) -> None:
        """The transaction ``add_new`` wrote to committed: its inserts are stored."""
        self._uncommitted = 0

    def aborted(self) -> None:
        """The transaction ``add_new`` wrote to was aborted: its inserts are not in LMDB."""
        self._count -= self._uncommitted
        self._uncommitted = 0

    def stats(self) -> dict[str, float | int]:
        """Counters for the report: URLs stored, and repeats the recent cache answered."""
        return {"count": self._count, "recent_hits": self.recent_hits}

    def _recent_hit(self, txn: lmdb.Transaction, digest: bytes) -> bool:
        """A recently seen digest, confirmed in LMDB by a lookup (no write)."""
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


def _drop_retired_log(env: lmdb.Environment) -> None:
    """Drop an older version's ``seen_recent`` database, if the environment has one: a
    lookup in LMDB's main database at each open, a write transaction only the first time."""
    with env.begin() as txn:
        present = txn.get(RETIRED_LOG_DB) is not None
    if not present:
        return
    with env.begin(write=True) as txn:
        db = env.open_db(RETIRED_LOG_DB, txn=txn, create=False)
        txn.drop(db, delete=True)
    log.info("seen-set: dropped %s, kept by versions with a Bloom filter", RETIRED_LOG_DB)
