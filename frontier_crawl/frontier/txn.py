"""The frontier's write transactions: one LMDB write transaction per batch (an engine tick).

Each commit of a durable LMDB environment costs an fdatasync, so every change the frontier's
parts make inside :meth:`Transactions.batch` goes into one transaction: committed at the end,
aborted (LMDB keeps the state before it) by an exception. :meth:`Transactions.write` gives a
part the open batch's transaction, or one of its own outside a batch.

The frontier tells it what to do around a commit: ``flush`` writes what its parts buffered
(queue entries, seen digests, counts) into the transaction before it commits; ``aborted``
forgets what they staged for it; ``committed`` applies what a part learns only once a commit
made it durable (settled links, delivered inbox batches).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from frontier_crawl.frontier.store import storage_errors

if TYPE_CHECKING:
    from pathlib import Path

    import lmdb


class Transactions:
    """Write transactions over one LMDB environment; ``txn`` is the open batch's (or None)."""

    __slots__ = ("_aborted", "_committed", "_env", "_flush", "_path", "txn")

    def __init__(
        self,
        env: lmdb.Environment,
        path: Path,
        *,
        flush: Callable[[lmdb.Transaction[bytes]], None],
        aborted: Callable[[], None],
        committed: Callable[[], None],
    ) -> None:
        self._env = env
        self._path = path  #: named by a StorageError (a full or failing disk)
        self._flush, self._aborted, self._committed = flush, aborted, committed
        self.txn: lmdb.Transaction[bytes] | None = None  #: the open batch's transaction

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group every change made inside into one write transaction (nested: the outer one)."""
        if self.txn is not None:
            yield
            return
        with self.transaction() as txn:
            self.txn = txn
            try:
                yield
            finally:
                self.txn = None

    @contextmanager
    def write(self) -> Iterator[lmdb.Transaction[bytes]]:
        """The batch's transaction if one is open, else a transaction of its own."""
        if self.txn is not None:
            yield self.txn
        else:
            with self.transaction() as txn:
                yield txn

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction[bytes]]:
        """The batch's transaction if one is open, else a read-only one of its own."""
        if self.txn is not None:
            yield self.txn
        else:
            with self._env.begin() as txn:
                yield txn

    @contextmanager
    def transaction(self) -> Iterator[lmdb.Transaction[bytes]]:
        """A new write transaction: flushed and committed at the end, aborted by an exception."""
        try:
            with storage_errors(self._path), self._env.begin(write=True) as txn:
                yield txn
                self._flush(txn)
        except BaseException:
            self._aborted()
            raise
        self._committed()
