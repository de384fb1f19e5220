"""Links for hosts owned by another worker process, carried in durable batches.

Hosts are partitioned over workers by a stable hash of the origin (:func:`owner_of`). A worker
that finds a link to a host it does not own adds it to an outgoing batch; the batch is committed
into the owner's *inbox*, a named database ``b"inbox"`` inside the owner's own frontier LMDB
environment (LMDB serialises writers across processes), before the sender commits the page
the links came from. The owner ingests its inbox into its frontier inside one of its own
transactions and deletes the batch in that same transaction.

So a kill at any instant loses no link: a batch is either in the inbox (ingested later) or its
page is not complete at the sender (fetched again, links sent again, deduplicated by the owner's
seen-set). The batch first goes into the sender's own *outbox* (in the sender's transaction),
and is moved to the owner's inbox after that commit, outside any transaction of the sender's:
a worker never holds its own LMDB writer lock while waiting for a peer's, so two workers
sending to each other cannot deadlock. Batches are counted when delivered and when ingested;
the coordinator declares the crawl over when every worker is idle and the counts agree (see
``frontier_crawl.workers``).

Inbox key: the coordinator's 8-byte run id + 8 random bytes (unique without coordination);
value: msgpack list of ``(url, depth, referrer, hops)``. The run id lets the receiver count only
batches delivered during this run, so sent and received counts agree even when an earlier,
killed run left batches in an inbox (those are ingested but not counted) or delivered one twice.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import lmdb
import msgspec

from frontier_crawl.frontier.store import open_env

INBOX_DB = b"inbox"

Link = tuple[str, int, str | None, int]  # url, depth, referrer, hops

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[tuple[str, int, str | None, int]])


def owner_of(origin: str, workers: int) -> int:
    """The worker that owns a host: a stable hash of its origin, the same in every process."""
    if workers <= 1:
        return 0
    digest = hashlib.blake2b(origin.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % workers


def encode_links(links: list[Link]) -> bytes:
    return _encoder.encode(links)


def decode_links(data: bytes) -> list[Link]:
    return _decoder.decode(data)


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
        env = self._envs.get(dest)
        if env is None:
            self._paths[dest].parent.mkdir(parents=True, exist_ok=True)
            env = self._envs[dest] = open_env(self._paths[dest], self._map_size)
            self._dbs[dest] = env.open_db(INBOX_DB)
        with env.begin(write=True, db=self._dbs[dest]) as txn:
            txn.put(self._run_id + os.urandom(8), batch)
        self.sent += 1

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
