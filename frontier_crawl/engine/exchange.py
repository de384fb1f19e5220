"""The peer exchange, a worker's side of the ``PeersLike`` seam (``workers.Peers``): links to
hosts another worker owns are batched in an outbox, written into the group commit's
transaction with the pages that found them, and delivered after it commits (never inside a
transaction, so two workers delivering to each other cannot deadlock); the other workers'
batches are ingested from the durable inbox.

What a delivery costs the sender's own environment: nothing of its own. The delivered batches
leave the outbox in the next group commit's transaction (or, when no group is open, in one
transaction of their own before the worker says it is idle), not in a commit (an fdatasync)
after every delivery; until then they are skipped, not sent again. A kill before that
transaction only sends them again after the restart, which the owner's seen-set makes
harmless (``frontier/mailbox.py``). Ingesting into an open group adds its links to that
group's transaction, committed with it."""

from __future__ import annotations

import time

from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.engine.seams import PeersLike
from frontier_crawl.engine.state import LoopState
from frontier_crawl.frontier.faces import Exchanged
from frontier_crawl.frontier.mailbox import Link, decode_links, encode_batches

#: a batch the transport cannot take now (a full Redis) is tried again this much later; it
#: waits in the durable outbox meanwhile, and the crawl of this worker's own hosts goes on
DELIVER_RETRY_S = 0.5


class PeerExchange:
    """One worker's outbox and inbox, committed with its group commit."""

    def __init__(
        self,
        peers: PeersLike,
        frontier: Exchanged,
        group: CommitGroup,
        run: LoopState,
        max_batch_bytes: int,
    ) -> None:
        self.peers = peers
        self._max_bytes = max_batch_bytes
        self._frontier = frontier
        self._group = group
        self._run = run
        self._outbox: dict[int, list[Link]] = {}
        self._received = 0  #: link batches ingested from other workers (this run)
        self._undelivered = True  # an earlier run may have left outbox batches
        self._deliver_at = 0.0  #: when a batch the transport could not take is tried again
        #: outbox keys delivered, to delete in the next transaction; and those being deleted
        #: in the open one (forgotten once it commits)
        self._forget: list[bytes] = []
        self._forgetting: list[bytes] = []
        group.before_commit.append(self._stage)
        group.after_commit.append(self._deliver_committed)

    @property
    def waiting(self) -> bool:
        """Links of ours not yet handed over (in the outbox, or committed, not delivered), or
        delivered batches not yet deleted from the outbox."""
        return self._undelivered or bool(self._outbox) or bool(self._forget or self._forgetting)

    def foreign(self, dest: int, link: Link) -> None:
        """A link to a host another worker owns: batched, sent after this group commits."""
        self._outbox.setdefault(dest, []).append(link)
        self._group.dirty = True

    def swap(self, now: float, idle: bool) -> bool:
        """Once a tick: deliver and ingest link batches, publish this worker's state; True
        once the coordinator says the crawl is over."""
        peers, frontier, group = self.peers, self._frontier, self._group
        if self._run.held_up and not group.is_open:  # (else the group's commit tries again)
            self._deliver()
        if self._forget and not group.is_open:  # (else in the group's transaction)
            frontier.mail.delivered(self._forget)  # one commit for them all
            self._forget = []
        if group.is_open:  # the links join the group's transaction, committed with it
            ingested, counted = frontier.mail.ingest_inbox(now, peers.run_id)
            if ingested:
                group.dirty = True
        else:
            with frontier.batch():
                ingested, counted = frontier.mail.ingest_inbox(now, peers.run_id)
                if ingested:
                    group.dirty = True
                    group.sync()
        self._received += counted
        # idle only with no link of ours left to hand over: none in the in-memory outbox
        # (waiting for the group commit) and none committed but not yet delivered
        idle = idle and ingested == 0 and not self.waiting
        peers.publish(idle, self._received)
        return peers.should_stop()

    def _stage(self) -> None:
        """Before a commit: the outbox's batches into its transaction (delivered after it),
        and the delivered ones out of it."""
        if self._forget:
            self._frontier.mail.delivered(self._forget)
            self._forgetting.extend(self._forget)
            self._forget = []
        if self._outbox:
            for dest, links in self._outbox.items():
                self._frontier.mail.queue_outgoing(dest, links, self._max_bytes)
            self._outbox.clear()
            self._undelivered = True

    def _deliver_committed(self) -> None:
        self._forgetting.clear()  # their deletion is committed
        if self._undelivered:
            self._deliver()

    def _deliver(self) -> None:
        """Move committed outbox batches into their owners' inboxes. Those the transport
        cannot take now stay in the outbox, tried again DELIVER_RETRY_S later."""
        now = time.monotonic()
        if now < self._deliver_at:
            return
        frontier = self._frontier
        while True:
            listed = frontier.mail.outgoing(256 + len(self._forget) + len(self._forgetting))
            gone = {*self._forget, *self._forgetting}  # delivered, their deletion not committed
            pending = [entry for entry in listed if entry[0] not in gone]
            if self._split_large(pending):
                continue  # listed again: the pieces instead of the batch
            sent = []
            for key, dest, batch in pending:
                if not self.peers.send(dest, batch):
                    break
                sent.append(key)
            self._forget.extend(sent)  # deleted with the next transaction
            if sent:
                self._group.dirty = True
            if len(sent) < len(pending):
                self._run.held_up = len(pending) - len(sent)
                self._deliver_at = now + DELIVER_RETRY_S
                return
            if len(pending) < 256:
                break
        self._undelivered = False
        self._run.held_up = 0

    def _split_large(self, pending: list[tuple[bytes, int, bytes]]) -> bool:
        """Split outbox batches larger than ``cluster.max_batch_bytes`` (left by an earlier
        version, which did not cap them, or under a larger cap) before they are sent: Redis
        refuses a write larger than the room it has left, whatever it holds. True if any."""
        split = False
        for key, dest, batch in pending:
            if len(batch) <= self._max_bytes:
                continue
            pieces = encode_batches(decode_links(batch), self._max_bytes)
            if len(pieces) > 1:  # (one link larger than the cap: sent as it is)
                self._frontier.mail.split_outgoing(key, dest, pieces)
                split = True
        return split
