"""Links for hosts owned by another worker process, carried in durable batches.

Hosts are partitioned over workers by a stable hash of the origin (:func:`owner_of`). A worker
that finds a link to a host it does not own adds it to an outgoing batch. The batch goes first
into the sender's own *outbox* (in the sender's transaction, with the page the links came
from), and after that commit into the owner's *inbox*: an LMDB environment of its own
(``state/inbox.lmdb`` of the owner, :data:`INBOX_ENV`), which peers write in short
transactions and the owner reads and clears (:class:`Inbox`). It is not a database inside the
owner's frontier environment: LMDB has one writer lock per environment, and the owner holds
its frontier's for a whole group commit (``frontier.commit_interval_s``), so a peer delivering
there waited for that commit every time (measured with two workers: about 17 ms per batch,
some 17% of each worker's time).

The owner admits a batch's links in one of its frontier transactions and deletes the batch from
its inbox only after that transaction committed (:meth:`Inbox.take`, :meth:`Inbox.ack`); until
then the batch is not read again. So a kill at any instant loses no link: a batch is in the
sender's outbox (delivered later), or in the inbox (ingested later), or its links are committed
in the owner's frontier; a kill between that commit and the inbox delete ingests the batch
again after the restart, which admits nothing twice (the seen-set). A page whose outbox commit
did not happen is not complete at the sender (fetched again, links sent again, deduplicated by
the owner's seen-set). A worker never holds its own LMDB writer lock while waiting for a
peer's, so two workers sending to each other cannot deadlock. Batches are counted when
delivered and when ingested; the coordinator declares the crawl over when every worker is idle
and the counts agree (see ``frontier_crawl.workers``).

The owner deletes admitted batches from its inbox lazily (:data:`ACK_EVERY_S`): in one
transaction (one fdatasync) for all the batches its commits admitted since the last delete, and
when it closes, not in a commit after each of its commits; until then they are not handed out
again. A kill before the delete only ingests them again after the restart (see above).

Inbox key: the coordinator's 8-byte run id + 8 random bytes (unique without coordination);
value: msgpack list of ``(url, depth, referrer, hops)``, or ``(url, depth, referrer, hops,
callback, meta, priority)`` for a link a spider's callback yielded with those. The run id
lets the receiver count only batches delivered during this run, so sent and received counts
agree even when an earlier, killed run left batches in an inbox (those are ingested but not
counted) or delivered one twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import lmdb
import msgspec

from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.faces import Add
from frontier_crawl.frontier.records import Link as Link  # (re-exported)
from frontier_crawl.frontier.records import PlainLink
from frontier_crawl.frontier.store import open_checked_env, open_env, storage_errors

INBOX_DB = b"inbox"
INBOX_ENV = "inbox.lmdb"
"""A worker's inbox environment, inside its state directory."""


#: admitted batches are deleted from the inbox at most this often (and at close), in one
#: transaction for them all (:meth:`Inbox.ack`)
ACK_EVERY_S = 1.0
#: links in one batch at most (besides ``cluster.max_batch_bytes``): what one ingest admits
MAX_BATCH_LINKS = 10_000
_ARRAY_HEADER_MAX = 5  #: bytes of a msgpack array's header, at most


class _WireLink(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A link as a batch holds it: 4 items, or 7 when it carries a callback, meta or priority
    (the trailing defaults are not sent: a link without them costs what it did)."""

    url: str
    depth: int
    referrer: str | None
    hops: int
    callback: str = ""
    meta: bytes = b""
    priority: int = 0


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[_WireLink])


def owner_of(origin: str, workers: int) -> int:
    """The worker that owns a host: a stable hash of its origin, the same in every process."""
    if workers <= 1:
        return 0
    digest = hashlib.blake2b(origin.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % workers


def encode_links(links: Sequence[Link | PlainLink]) -> bytes:
    """A batch: plain links as 4 items (also when given as 7 with empty request fields)."""
    return _encoder.encode(
        [link if len(link) > 4 and (link[4] or link[5] or link[6]) else link[:4] for link in links]
    )


def encode_batches(links: Sequence[Link | PlainLink], max_bytes: int) -> list[bytes]:
    """``links`` as batches of at most ``max_bytes`` encoded bytes and :data:`MAX_BATCH_LINKS`
    links each, in order (a single link larger than ``max_bytes``: a batch of its own). One
    batch, encoded once, when they fit; else each link is measured on its own. No links: no
    batch."""
    if not links:
        return []
    if len(links) <= MAX_BATCH_LINKS:
        whole = encode_links(links)
        if len(whole) <= max_bytes:
            return [whole]
    out: list[bytes] = []
    group: list[Link | PlainLink] = []
    size = _ARRAY_HEADER_MAX
    for link in links:
        # a link alone is a one-item array: its 1-byte header is not part of the batch's
        n = len(encode_links((link,))) - 1
        if group and (size + n > max_bytes or len(group) >= MAX_BATCH_LINKS):
            out.append(encode_links(group))
            group, size = [], _ARRAY_HEADER_MAX
        group.append(link)
        size += n
    if group:
        out.append(encode_links(group))
    return out


def decode_links(data: bytes) -> list[Link]:
    return [
        (w.url, w.depth, w.referrer, w.hops, w.callback, w.meta, w.priority)
        for w in _decoder.decode(data)
    ]


class Mailbox:
    """The delivering side: one LMDB environment per peer, opened on first use."""

    def __init__(self, peer_envs: dict[int, Path], map_size: int, run_id: bytes) -> None:
        self._paths = peer_envs
        self._run_id = run_id
        self._map_size = map_size
        self._envs: dict[int, lmdb.Environment] = {}
        self._dbs: dict[int, lmdb._Database] = {}
        self.sent = 0  #: batches committed into peers' inboxes

    def send(self, dest: int, batch: bytes) -> None:
        """Commit one encoded batch into ``dest``'s inbox (durable when this returns).

        Never call it inside a write transaction of one's own environment (see
        ``Frontier.queue_outgoing``): two workers doing so to each other would deadlock.
        """
        with storage_errors(self._paths[dest]):
            env = self._envs.get(dest)
            if env is None:
                env = self._envs[dest] = open_env(self._paths[dest], self._map_size)
                self._dbs[dest] = env.open_db(INBOX_DB)
            with env.begin(write=True, db=self._dbs[dest]) as txn:
                txn.put(self._run_id + os.urandom(8), batch)
        self.sent += 1

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


_LOST_LINKS = (
    "The links other workers had delivered to this worker and it had not yet admitted are "
    "lost: pages reachable only through them are not crawled (a new crawl would find them)."
)


class Inbox:
    """The receiving side: this worker's inbox environment, which peers write into.

    :meth:`take` hands out batches not handed out before; :meth:`ack` says every batch taken
    so far is admitted (call it once the transaction that admitted them has committed): they
    are deleted, with those acknowledged before, at most every :data:`ACK_EVERY_S` and at
    :meth:`close` (:meth:`flush`); :meth:`release` forgets the batches taken and not yet
    acknowledged instead (that transaction was aborted), so they are taken again.
    """

    def __init__(self, path: Path, map_size: int) -> None:
        self._path = path
        self._env = open_checked_env(path, map_size, _LOST_LINKS)
        try:
            self._db = self._env.open_db(INBOX_DB)
            with self._env.begin(db=self._db) as txn:  # every batch must decode
                for _key, value in txn.cursor():
                    decode_links(bytes(value))
        except (lmdb.Error, msgspec.DecodeError) as exc:
            self._env.close()
            raise DamagedState(path, f"the worker's inbox is damaged ({exc})", _LOST_LINKS) from exc
        self._taken: set[bytes] = set()  #: handed out, not yet acknowledged or released
        self._admitted: set[bytes] = set()  #: acknowledged, not yet deleted
        self._delete_at = 0.0  #: when acknowledged batches are deleted next (monotonic)
        self._read_upto = -1  #: the inbox was read to its end as of this transaction id

    def take(self, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` batches (key, encoded links) in key order, none taken before."""
        # nothing committed into the inbox since it was last read to the end: nothing new
        # (the environment's last transaction id, read from its meta pages: no transaction)
        txnid = self._env.info()["last_txnid"]
        if txnid == self._read_upto:
            return []
        out: list[tuple[bytes, bytes]] = []
        taken, admitted = self._taken, self._admitted
        with self._env.begin(db=self._db) as txn:
            for key, value in txn.cursor():
                if key in taken or key in admitted:
                    continue
                out.append((bytes(key), bytes(value)))
                if len(out) >= limit:
                    break
            else:  # every batch of transaction ``txnid`` (or later) seen
                self._read_upto = txnid
        for key, _ in out:
            taken.add(key)
        return out

    def ack(self) -> None:
        """Every batch taken is admitted (its links are committed): deleted now if the last
        delete is :data:`ACK_EVERY_S` old, else by a later :meth:`ack` or :meth:`flush`."""
        if self._taken:
            self._admitted |= self._taken
            self._taken.clear()
        if self._admitted and time.monotonic() >= self._delete_at:
            self.flush()

    def flush(self) -> None:
        """Delete every acknowledged batch, in one short transaction."""
        if not self._admitted:
            return
        with storage_errors(self._path), self._env.begin(write=True, db=self._db) as txn:
            for key in self._admitted:
                txn.delete(key)
        self._admitted.clear()
        self._delete_at = time.monotonic() + ACK_EVERY_S

    def release(self) -> None:
        """Forget the batches taken and not acknowledged: the next :meth:`take` returns them."""
        self._taken.clear()
        self._read_upto = -1

    def pending(self) -> int:
        """Batches in the inbox not yet admitted (taken or not)."""
        with self._env.begin(db=self._db) as txn:
            return int(txn.stat(self._db)["entries"]) - len(self._admitted)

    def close(self) -> None:
        """Delete the admitted batches (a failure only leaves them to be ingested again),
        then close."""
        with contextlib.suppress(lmdb.Error, OSError):
            self.flush()
        self._env.close()


class PeerMail:
    """A worker's side of the link exchange, over its frontier (``Frontier.mail``): batches
    for other workers kept in the outbox with the transaction that found them, delivered
    after it committed; batches from them admitted from the inbox (``None`` outside worker
    mode: nothing to ingest). ``batch``, ``write``: the frontier's transactions; ``add``: its
    admission."""

    __slots__ = ("_add", "_batch", "_env", "_inbox", "_outbox", "_write")

    def __init__(
        self,
        env: lmdb.Environment,
        outbox: lmdb._Database,
        inbox: Inbox | None,
        batch: Callable[[], AbstractContextManager[None]],
        write: Callable[[], AbstractContextManager[lmdb.Transaction[bytes]]],
        add: Add,
    ) -> None:
        self._env = env
        self._outbox = outbox
        self._inbox = inbox
        self._batch = batch
        self._write = write
        self._add = add

    def aborted(self) -> None:
        """The frontier's transaction was aborted: the batches it took are taken again."""
        if self._inbox is not None:
            self._inbox.release()  # their links were not committed

    def committed(self) -> None:
        """The frontier's transaction committed: the batches it admitted leave the inbox."""
        if self._inbox is not None:
            self._inbox.ack()

    def ingest_inbox(self, now: float, run_id: bytes = b"", limit: int = 64) -> tuple[int, int]:
        """Admit link batches other workers delivered into this worker's inbox.

        The links are admitted in the current (batch) transaction; the batches leave the inbox
        once it has committed (``frontier/mailbox.py``). Returns the number of batches
        ingested, and how many of them were delivered during run ``run_id`` (the termination
        count of ``frontier_crawl.workers``). Nothing to do outside worker mode.
        """
        if self._inbox is None:
            return 0, 0
        with self._batch():
            batches = self._inbox.take(limit)
            for _key, value in batches:
                for url, depth, referrer, hops, callback, meta, priority in decode_links(value):
                    self._add((url,), depth=depth, referrer=referrer, hops=hops, now=now,
                              callback=callback, meta=meta, priority=priority)  # fmt: skip
        return len(batches), sum(key.startswith(run_id) for key, _ in batches)

    def queue_outgoing(self, dest: int, links: list[Link], max_bytes: int) -> None:
        """Keep links for another worker in this frontier's outbox, in the current transaction:
        one batch, or several of at most ``max_bytes`` each (:func:`encode_batches`), each
        delivered (and, across nodes, acknowledged) on its own.

        Delivery (:meth:`outgoing` / :meth:`delivered`) happens after the commit, never inside
        a transaction of ours: holding our writer lock while waiting for a peer's (which may be
        waiting for ours) would deadlock. A kill between commit and delivery only delays it.
        """
        with self._write() as txn:
            for batch in encode_batches(links, max_bytes):
                txn.put(dest.to_bytes(2, "big") + os.urandom(14), batch, db=self._outbox)

    def outgoing(self, limit: int = 256) -> list[tuple[bytes, int, bytes]]:
        """Committed batches not yet delivered: (key, destination worker, encoded links)."""
        with self._env.begin(db=self._outbox) as txn:
            out = []
            for key, value in txn.cursor():
                out.append((bytes(key), int.from_bytes(key[:2], "big"), bytes(value)))
                if len(out) >= limit:
                    break
        return out

    def split_outgoing(self, key: bytes, dest: int, batches: Sequence[bytes]) -> None:
        """Replace one outbox batch by ``batches`` (its links, split), in one transaction:
        the links are in the outbox before and after, never twice and never lost."""
        with self._write() as txn:
            txn.delete(key, db=self._outbox)
            for batch in batches:
                txn.put(dest.to_bytes(2, "big") + os.urandom(14), batch, db=self._outbox)

    def delivered(self, keys: Iterable[bytes]) -> None:
        """Forget outbox batches now committed into their destinations' inboxes."""
        with self._write() as txn:
            for key in keys:
                txn.delete(key, db=self._outbox)
