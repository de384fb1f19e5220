"""One node of a cluster crawl, as its coordinator process sees it: membership, identity, the
node's incoming streams, the cluster-wide end of the crawl, and the reports.

Partitions. The crawl has ``nodes x processes`` partitions; node ``n`` runs the partitions
``n*processes .. n*processes+processes-1``, one worker process each. Each partition has one
Redis stream (``<prefix>:p:<partition>``) with one consumer group, read by its node only.

Delivery (:meth:`ClusterNode.pump`). The coordinator reads its partitions' streams with
XREADGROUP, writes each new batch into the owner worker's LMDB inbox (the same inbox the
node's own workers deliver into, committed when ``deliver`` returns), records its batch id in
the node's ledger (``cluster.lmdb``, also committed), and only then acknowledges and deletes
the entry (XDEL then XACK, not in a MULTI: both are allowed when Redis is at ``maxmemory``,
commands inside a MULTI are not, and the owners must always drain, which frees the memory).
A kill before the XACK leaves the entry pending: after the restart it is read again
(XREADGROUP from id 0 under the same consumer name) and, its id being in the ledger (or its
fields already deleted), acknowledged without being delivered twice. So is an entry whose read
lost its reply (Redis killed, or the connection cut, after it ran the XREADGROUP): pending for
this node and delivered to no one, it is read again once the node finds nothing new
(``PENDING_RECHECK_S``).
Redis holds nothing once acknowledged: its memory is the batches in flight (never trimmed by
MAXLEN, which in Redis 7.0 deletes entries whether acknowledged or not).

Membership (:meth:`ClusterNode.join`). ``<prefix>:member:<n>`` is taken with SET NX and a
random token, the machine, the PID and the process's start time (field 22 of
/proc/<pid>/stat, so that a reused PID is not mistaken for it), a TTL of ``heartbeat_ttl_s``,
and extended every third of it while the token is still ours. A second process with the same
``--node`` finds the key alive: if it names a process of this machine that has ended (gone, a
zombie not yet reaped by its parent, or its PID reused: a node killed with -9 and started
again at once, as systemd's ``Restart=`` does), it takes the membership over at once; if it
names a live process of this machine, it is refused (exit 2); if it cannot tell (another
machine, no /proc) it waits for the key to lapse, saying so on one line, and is refused only if
the holder renews it meanwhile (it is alive). ``<key_prefix>:identity`` holds the crawl's
configuration and id; a node whose configuration differs, or whose state belongs to another
crawl, is refused, naming the keys (``crawlid.py``). ``<prefix>`` above is
``<key_prefix>:<crawl id>``: no key of another crawl is ever read.

End of the crawl (:meth:`ClusterNode.begin` / :meth:`ClusterNode.answer`): a probe in
rounds. Each round has a number in ``<prefix>:probe``. A node whose workers look quiet
(every worker idle and every batch delivered inside the node, or from its streams, ingested,
in two snapshots a coordinator tick apart, as one machine does) reads the round number,
looks once more (the same snapshot again) and answers, for that round: its run id, that it
is quiet, and its counts. A busy node does not answer: no round completes without it. Node 0
decides: once every node has answered the round, it compares the answers, Redis's count of
batches sent and the streams' total length with those of the previous round. All quiet,
every stream empty (every batch acknowledged and deleted), and nothing changed: the crawl is
over, and node 0 sets ``<prefix>:done`` (under WATCH of the counts, so a batch added
meanwhile, by a node or by ``add-seeds``, cancels it). Otherwise it starts the next round.
Why that suffices: every answer of a round was computed after the round began, so a batch
that moved between two rounds changed some count (sent, a stream's length, a node's
delivered or ingested count), and work that a node started between them came from such a
batch. Every node sees ``done`` and ends by itself.
Until every node has joined (and while one is down) no round completes and the crawl cannot
end: links for the missing node's partitions wait in their streams.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb

from frontier_crawl.cluster.client import (
    CONSUMER,
    GROUP,
    ClusterRefused,
    Keys,
    Redis,
)
from frontier_crawl.cluster.crawlid import adopt, mark_joined
from frontier_crawl.cluster.view import publish_summary, read_view, summary_every
from frontier_crawl.proctree import pid_exists, proc_stat

if TYPE_CHECKING:  # imported where used (client.py says why)
    import redis

log = logging.getLogger(__name__)

READ_COUNT = 256  #: stream entries read per partition and call
LEDGER_KEEP_S = 86_400.0  #: batch ids remembered this long (a resent batch inside it: once)
LEDGER_PRUNE_EVERY_S = 3600.0
#: a node reads the cluster's view with at most this many Redis commands a second (a second
#: apart up to ~80 partitions; 100 nodes of 8 processes: every 4 s; 1024 of 64: every 270 s).
#: Measured under load: 2 ms a read for 3 nodes of 2 processes, 240 ms for 100 of 8
VIEW_COMMANDS_PER_S = 250
#: how often an owner that finds nothing new reads its pending entries again: entries of a
#: read whose reply was lost (Redis killed or the connection cut after it ran the command;
#: redis-py may also resend it, which reads new entries only) are pending for the owner and
#: delivered to no one, and the crawl cannot end while they are in the stream
PENDING_RECHECK_S = 1.0
LAPSE_POLL_S = 0.25  #: how often a node waiting for an old membership to lapse looks again
#: a TTL read this much above what the last one leaves now: the holder renewed it (its
#: heartbeat adds a third of the TTL or more)
RENEWED_SLACK_MS = 200

_RENEW = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if not v then return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) and 1 end
return 0
"""
_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) and 1
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def partitions_of(node: int, processes: int) -> range:
    return range(node * processes, (node + 1) * processes)


class Ledger:
    """Batch ids this node has written into its inboxes (LMDB, beside the workers' state)."""

    def __init__(self, path: Path, map_size: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._env = lmdb.open(str(path), map_size=map_size, subdir=True, max_dbs=2)
        self._db = self._env.open_db(b"pumped")

    def known(self, ids: Sequence[bytes]) -> set[bytes]:
        with self._env.begin(db=self._db) as txn:
            return {i for i in ids if txn.get(i) is not None}

    def add(self, ids: Sequence[bytes], now: float) -> None:
        stamp = struct.pack(">d", now)
        with self._env.begin(write=True, db=self._db) as txn:
            for i in ids:
                txn.put(i, stamp)

    def prune(self, older_than: float) -> int:
        gone = 0
        with self._env.begin(write=True, db=self._db) as txn:
            cursor = txn.cursor()
            for key, value in list(cursor):
                if struct.unpack(">d", value)[0] < older_than:
                    txn.delete(key)
                    gone += 1
        return gone

    def close(self) -> None:
        self._env.close()


@dataclass(slots=True)
class Every:
    """A task due every ``every_s`` seconds, from ``next_at`` on."""

    every_s: float
    next_at: float = 0.0

    def due(self, now: float) -> bool:
        """Whether the task is due, and if so, the next one counted from now."""
        if now < self.next_at:
            return False
        self.next_at = now + self.every_s
        return True


@dataclass(slots=True)
class NodeTimers:
    """When a node's periodic tasks are next due (monotonic seconds)."""

    beat: Every  #: the membership heartbeat
    summary: Every  #: this node's live summary, published
    view: Every  #: every node's summaries and the streams' lengths, read
    prune: Every  #: the ledger's old ids dropped
    recheck: Every  #: this node's pending stream entries read again


class ClusterNode:
    """Node ``node`` of ``nodes``, each running ``processes`` partitions (module docstring)."""

    def __init__(
        self,
        redis_link: Redis,
        keys: Keys,
        *,
        nodes: int,
        node: int,
        processes: int,
        heartbeat_ttl_s: float,
        ledger_path: Path,
        map_size: int,
        run_id: bytes,
    ) -> None:
        if not 0 <= node < nodes:
            raise ClusterRefused(
                f"--node {node} is out of range: cluster.nodes = {nodes}, so the nodes are "
                f"numbered 0 to {nodes - 1}"
            )
        self.redis = redis_link
        self.keys = keys
        self.nodes = nodes
        self.node = node
        self.partitions = partitions_of(node, processes)
        self.total = nodes * processes
        self._ttl_ms = int(heartbeat_ttl_s * 1000)
        pid = os.getpid()
        self._token = json.dumps(
            {
                "token": os.urandom(8).hex(),
                "host": socket.gethostname(),
                "pid": pid,
                "start": process_start(pid),  # with the PID: this process, not a later one
                "boot": _boot_id(),
            }
        )
        self._ledger_path = ledger_path
        self._map_size = map_size
        self._ledger: Ledger | None = None
        self._run = run_id.hex()
        #: where each stream is read from: b"0" (our pending entries, after a restart) until
        #: they are done, then b">" (new entries)
        self._cursor: dict[str, bytes] = {keys.stream(p): b"0" for p in self.partitions}
        self._block_ms = 0
        self.pumped = 0  #: batches written into this node's inboxes (this run)
        self.duplicates = 0  #: entries acknowledged without delivery (id already in the ledger)
        self.rejected = 0  #: entries that were not link batches
        self._probe = 0
        self._previous_round: object = None
        self._evaluated = -1  #: the probe round last evaluated
        self._joined = False
        self.processes = processes
        self.summary_every_s = summary_every(heartbeat_ttl_s)
        #: the view is read this often: each node reads every node's summary and membership
        #: and every stream's length, at most VIEW_COMMANDS_PER_S commands a second
        view_every_s = max(self.summary_every_s, (2 * nodes + self.total) / VIEW_COMMANDS_PER_S)
        now = time.monotonic()
        self._due = NodeTimers(
            beat=Every(heartbeat_ttl_s / 3),
            summary=Every(self.summary_every_s),
            view=Every(view_every_s),
            prune=Every(LEDGER_PRUNE_EVERY_S, now),
            recheck=Every(PENDING_RECHECK_S, now + PENDING_RECHECK_S),
        )

    # ------------------------------------------------------------------------------ membership

    def join(
        self,
        identity: Mapping[str, Any],
        upgradable: Mapping[str, Collection[Any] | None] | None = None,
    ) -> None:
        """Find this node's crawl (``crawlid.py``: the configuration checked, a crawl of
        another run refused), take this node's membership, create the streams' groups.

        ``upgradable``: keys whose value in the cluster may be one of these older ones (the
        frontier's layout versions a node upgrades its own state from, so that a cluster crawl
        started by an older version goes on after every node is upgraded); None: any value
        (a key older versions wrote that this one no longer compares)."""
        self.keys = keys = adopt(
            self.redis, self.keys.base, identity, upgradable, node=self.node,
            root=self._ledger_path.parent, has_state=self._ledger_path.exists(),
            running=self._member_running,
        )  # fmt: skip
        self._cursor = {keys.stream(p): b"0" for p in self.partitions}
        self._take_membership()
        mark_joined(self.redis, keys, self.node)
        for partition in range(self.total):
            self.redis.call("creating the stream groups", partial(self._group, partition=partition))
        self._ledger = Ledger(self._ledger_path, self._map_size)
        self._joined = True
        log.info(
            "node %d joined the cluster at %s (crawl %s)",
            self.node, self.redis.where, keys.crawl or "without an id",
        )  # fmt: skip

    def _member_running(self, keys: Keys) -> bool:
        """Whether a process that has not provably ended holds this node's membership."""
        raw: Any = self.redis.call("joining", lambda c: c.get(keys.member(self.node)))
        if raw is None:
            return False
        return holder_ended(_holder_of(bytes(raw))) is not True

    def _group(self, client: redis.Redis, partition: int) -> None:
        import redis

        try:
            # from id 0: entries added before the group existed are read too
            client.xgroup_create(self.keys.stream(partition), GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _take_membership(self) -> None:
        """SET NX; a membership held by a process that has provably ended (this machine,
        :func:`holder_ended`) is taken over at once; one held by a live process is refused;
        one whose holder cannot be proved ended (another machine, no /proc) is waited for
        until it lapses, and refused if its holder renews it meanwhile (it is alive)."""
        key = self.keys.member(self.node)
        waiting: tuple[bytes, int, float] | None = None  #: (value, its TTL, when read)
        while True:
            if self.redis.call(
                "joining", lambda c: c.set(key, self._token, nx=True, px=self._ttl_ms)
            ):
                if waiting is not None:
                    log.warning("node %d: the old membership lapsed: joining", self.node)
                return
            raw, ttl_ms = self.redis.call("joining", lambda c: (c.get(key), c.pttl(key)))
            read_at = time.monotonic()
            if raw is None or ttl_ms == -2:  # expired meanwhile (-2: between GET and PTTL)
                continue
            held = bytes(raw) if isinstance(raw, bytes) else str(raw).encode()
            holder = _holder_of(held)
            ended = holder_ended(holder)
            if ended:
                taken = self.redis.call(
                    "joining",
                    partial(self._take_over, key=key, held=held),
                )
                if taken:
                    log.warning(
                        "node %d: taking over from process %s of this machine, which has ended",
                        self.node, holder.get("pid"),
                    )  # fmt: skip
                    return
                continue  # it changed meanwhile: look again
            who = f"process {holder.get('pid', '?')} on {holder.get('host', '?')}"
            if ended is False or ttl_ms < 0:  # alive, or a key that never expires
                raise ClusterRefused(
                    f"node {self.node} is already running ({who}; its membership expires "
                    f"{max(ttl_ms, 0) / 1000:.0f} s after its last heartbeat): start each "
                    "--node once"
                )
            if waiting is not None:
                value, ttl_before, before = waiting
                renewed = ttl_ms > ttl_before - (read_at - before) * 1000 + RENEWED_SLACK_MS
                if held != value or renewed:
                    raise ClusterRefused(
                        f"node {self.node} is already running ({who} renewed its membership "
                        "while this one waited for it to lapse): start each --node once"
                    )
            else:
                log.warning(
                    "node %d: waiting up to %.0f s for the membership of %s to lapse (that "
                    "process cannot be proved ended from here; if it renews it, it is alive "
                    "and this node is refused)",
                    self.node, ttl_ms / 1000, who,
                )  # fmt: skip
            waiting = (held, ttl_ms, read_at)
            time.sleep(min(LAPSE_POLL_S, ttl_ms / 1000 + 0.01))

    def _take_over(self, client: redis.Redis, key: str, held: bytes) -> bool:
        return bool(client.eval(_TAKE_OVER, 1, key, held, self._token, self._ttl_ms))

    def heartbeat(self, now: float) -> None:
        if not self._due.beat.due(now):
            return
        key = self.keys.member(self.node)
        kept = self.redis.call(
            "heartbeat", lambda c: c.eval(_RENEW, 1, key, self._token, self._ttl_ms)
        )
        if not kept:
            raise ClusterRefused(
                f"node {self.node}: another process has taken this node's membership "
                "(started with the same --node while this one could not reach Redis)"
            )

    def leave(self) -> None:
        if self._joined:
            key = self.keys.member(self.node)
            self.redis.call("leaving", lambda c: c.eval(_RELEASE, 1, key, self._token))
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    # ------------------------------------------------------------------------------ the view

    def summary_due(self, now: float) -> bool:
        """Whether this node's summary is due (``cluster/view.py``), and if so, the next one
        counted from now."""
        return self._due.summary.due(now)

    def publish_summary(self, summary: bytes) -> bool:
        """This node's live summary into Redis; skipped (False) while Redis is full."""
        return publish_summary(self.redis, self.keys, self.node, self._run, summary)

    def view_due(self, now: float) -> bool:
        return self._due.view.due(now)

    def read_view(self) -> dict[str, Any]:
        """The whole cluster as Redis shows it now (``cluster/view.py``)."""
        return read_view(self.redis, self.keys, self.nodes, self.processes)

    # ------------------------------------------------------------------------------ delivery

    def pump(
        self,
        deliver: Callable[[int, bytes], None],
        wait_s: float = 0.0,
        valid: Callable[[bytes], bool] | None = None,
    ) -> int:
        """Move new batches from this node's streams into its inboxes (module docstring),
        waiting up to ``wait_s`` for the first one (XREADGROUP BLOCK: a batch is moved as
        soon as it arrives, and an idle node does not poll).

        ``deliver(partition, batch)`` must have committed the batch when it returns. An entry
        that is not a batch (no id, or ``valid`` says its bytes are not one: written by
        something else than a node) is acknowledged, dropped and counted (``rejected``)."""
        assert self._ledger is not None
        self._block_ms = int(wait_s * 1000)
        reading_new = all(c == b">" for c in self._cursor.values())
        reply: Any = self.redis.call("reading the node's streams", self._read)
        if reading_new and not any(entries for _, entries in reply or []):
            self._recheck_pending()
        moved = 0
        for raw_stream, entries in reply or []:
            stream = raw_stream.decode() if isinstance(raw_stream, bytes) else str(raw_stream)
            partition = int(stream.rsplit(":", 1)[1])
            pending = self._cursor[stream] != b">"
            if pending:
                if not entries:
                    self._cursor[stream] = b">"  # our pending entries are done
                    continue
                self._cursor[stream] = entries[-1][0]  # go on after the last one
            ids = [entry_id for entry_id, _ in entries]
            fields = [f for _, f in entries if f]  # a deleted entry still pending: no fields
            good = [
                f for f in fields
                if isinstance(f.get(b"i"), bytes) and isinstance(f.get(b"b"), bytes)
                and (valid is None or valid(f[b"b"]))
            ]  # fmt: skip
            if len(good) < len(fields):
                self.rejected += len(fields) - len(good)
                log.warning(
                    "node %d: %d entries of %s are not link batches: dropped",
                    self.node, len(fields) - len(good), stream,
                )  # fmt: skip
                fields = good
            known = self._ledger.known([f[b"i"] for f in fields])
            fresh: list[bytes] = []
            for f in fields:
                if f[b"i"] in known or f[b"i"] in fresh:
                    self.duplicates += 1
                    continue
                deliver(partition, f[b"b"])
                fresh.append(f[b"i"])
            self._ledger.add(fresh, time.time())
            self.pumped += len(fresh)
            moved += len(fresh)
            self.redis.call("acknowledging batches", partial(self._ack, stream=stream, ids=ids))
        self._prune()
        return moved

    def _recheck_pending(self) -> None:
        """Nothing new: read this node's pending entries again next time, every
        PENDING_RECHECK_S at most (normally there are none: one more read, then new ones)."""
        if self._due.recheck.due(time.monotonic()):
            self._cursor = dict.fromkeys(self._cursor, b"0")

    def _read(self, client: redis.Redis) -> Any:
        streams: Any = self._cursor
        # BLOCK only once every stream reads new entries (pending ones never block anyway)
        reading_new = all(c == b">" for c in self._cursor.values())
        block = self._block_ms if self._block_ms and reading_new else None  # 0 would be forever
        return client.xreadgroup(GROUP, CONSUMER, streams, count=READ_COUNT, block=block)

    def _ack(self, client: redis.Redis, stream: str, ids: list[bytes]) -> None:
        # Not in a MULTI: when Redis is full it refuses every command queued in one. XDEL
        # first: a kill between the two leaves a deleted entry pending, which the restart
        # reads again (without fields) and acknowledges; the other order would leave an
        # acknowledged entry in the stream for ever, and the crawl could not end.
        with client.pipeline(transaction=False) as pipe:
            pipe.xdel(stream, *ids)
            pipe.xack(stream, GROUP, *ids)
            pipe.execute()

    def _prune(self) -> None:
        if any(c != b">" for c in self._cursor.values()):
            return
        if not self._due.prune.due(time.monotonic()):
            return
        assert self._ledger is not None
        self._ledger.prune(time.time() - LEDGER_KEEP_S)

    # ------------------------------------------------------------------------------ the end

    def begin(self) -> bool:
        """Start a coordinator tick: True once the crawl is over (``done`` set)."""
        self.heartbeat(time.monotonic())
        probe, done = self.redis.call(
            "reading the probe", lambda c: c.mget([self.keys.probe, self.keys.done])
        )
        self._probe = int(probe or 0)
        return bool(done)

    def answer(self, quiet: bool, counts: Sequence[int]) -> None:
        """Answer the round read by :meth:`begin` (after it: module docstring); node 0 also
        decides."""
        counted = [*counts, self.pumped]
        mine = json.dumps(
            {"probe": self._probe, "run": self._run, "quiet": quiet, "counts": counted}
        )
        # Redis full (maxmemory): no answer this tick, so no round completes (and the streams
        # are not empty anyway); the coordinator goes on draining them, which frees memory
        self.redis.call(
            "answering the probe",
            lambda c: bool(c.hset(self.keys.status, str(self.node), mine)) or True,
            when_full=False,
        )
        if self.node == 0:
            self.redis.call("deciding the end", self._decide, when_full=False)

    def _decide(self, client: redis.Redis) -> bool:
        import redis

        answers = {int(k): json.loads(v) for k, v in client.hgetall(self.keys.status).items()}
        if len(answers) < self.nodes or any(
            answers.get(n, {}).get("probe") != self._probe for n in range(self.nodes)
        ):
            return True  # the round is not complete
        if self._evaluated == self._probe:  # its INCR failed (retried, or Redis full): again
            client.incr(self.keys.probe)
            return True
        sent = int(client.hget(self.keys.counts, "sent") or 0)
        waiting = in_flight(client, self.keys, self.total)
        round_ = (
            [(n, a["run"], a["quiet"], a["counts"]) for n, a in sorted(answers.items())],
            sent,
            waiting,
        )
        over = (
            all(a["quiet"] for a in answers.values())
            and waiting == 0
            and round_ == self._previous_round
        )
        self._previous_round = round_  # (a round is compared with an earlier one only)
        self._evaluated = self._probe
        if not over:
            client.incr(self.keys.probe)
            return True
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(self.keys.counts)  # type: ignore[no-untyped-call]
                if int(pipe.hget(self.keys.counts, "sent") or 0) != sent:
                    pipe.reset()
                    client.incr(self.keys.probe)
                    return True
                pipe.multi()
                pipe.set(self.keys.done, b"1")
                pipe.execute()
                log.info("the cluster crawl is over (every partition idle, %d batches)", sent)
            except redis.WatchError:
                client.incr(self.keys.probe)
        return True

    # ------------------------------------------------------------------------------ reports

    def publish_report(self, report: Mapping[str, Any]) -> None:
        """The node's report into Redis (``report`` reads it); not waited for while Redis is
        full (the report is in the node's report.json)."""
        text = json.dumps(report)
        published = self.redis.call(
            "publishing the report",
            lambda c: bool(c.hset(self.keys.reports, str(self.node), text)) or True,
            when_full=False,
        )
        if not published:
            log.warning(
                "node %d: Redis is out of memory: this node's report is in its report.json "
                "only (not in Redis for the report command)",
                self.node,
            )


def in_flight(client: redis.Redis, keys: Keys, partitions: int) -> int:
    """Stream entries not yet acknowledged (and deleted) by their owners, over all partitions."""
    with client.pipeline(transaction=False) as pipe:
        for p in range(partitions):
            pipe.xlen(keys.stream(p))
        return sum(int(n) for n in pipe.execute())


def _holder_of(held: bytes) -> dict[str, Any]:
    try:
        holder = json.loads(held)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def process_start(pid: int) -> int | None:
    """``pid``'s start time (clock ticks after boot, field 22 of /proc/<pid>/stat), None if
    it cannot be read: with the PID, it names one process of one boot (a PID is reused)."""
    stat = proc_stat(pid)
    return stat[1] if stat is not None else None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def holder_ended(holder: Mapping[str, Any]) -> bool | None:
    """Whether the process a membership names has ended: True if provably (this machine,
    and its PID gone, a zombie, or reused by a later process; or the machine rebooted since),
    False if provably alive (the same process, running), None if it cannot be told (another
    machine, no /proc, a value without a start time)."""
    if holder.get("host") != socket.gethostname():
        return None
    try:
        pid = int(holder.get("pid", 0))
    except (TypeError, ValueError):
        return None
    if pid <= 0:
        return None
    if proc_stat(os.getpid()) is None:  # no /proc: kill(pid, 0) cannot tell a zombie
        return None if pid_exists(pid) else True
    boot = holder.get("boot")
    if boot and boot != _boot_id():
        return True
    stat = proc_stat(pid)
    if stat is None:  # gone, unless /proc hides other users' processes (hidepid)
        return None if pid_exists(pid) else True
    if stat[0] in ("Z", "X"):  # ended, not yet reaped by its parent
        return True
    start = holder.get("start")
    if start is None:
        return None  # (written by an older version) the PID may have been reused
    return bool(start != stat[1])  # another start time: the PID was reused


def add_batches(link: Redis, keys: Keys, batches: Mapping[int, Sequence[bytes]]) -> int:
    """Add batches to their partitions' streams (``add-seeds``), each in a MULTI of its own
    (so that no write is larger than a batch: Redis refuses one larger than the room it has
    left), counted as sent; clears ``done``, so that an ended cluster crawls them when its
    nodes run again (and running nodes do at once). Returns the number of batches. Run
    again after a failure, a batch added twice is admitted once (its id)."""
    from frontier_crawl.cluster.sender import batch_id

    def add(client: redis.Redis, partition: int, batch: bytes) -> None:
        with client.pipeline(transaction=True) as pipe:
            pipe.xadd(keys.stream(partition), {b"i": batch_id(batch), b"b": batch})
            pipe.hincrby(keys.counts, "sent", 1)
            pipe.delete(keys.done)
            pipe.execute()

    n = 0
    for partition, items in batches.items():
        for batch in items:
            link.call("adding seeds", partial(add, partition=partition, batch=batch))
            n += 1
    return n


def cluster_reports(link: Redis, keys: Keys) -> dict[int, dict[str, Any]]:
    """Each node's last published report."""
    raw = link.call("reading the reports", lambda c: c.hgetall(keys.reports))
    return {int(k): json.loads(v) for k, v in raw.items()}


def cluster_status(link: Redis, keys: Keys, partitions: int) -> dict[str, Any]:
    """What Redis knows of the crawl: batches sent and in flight, ended or not, memory used."""

    def read(c: redis.Redis) -> dict[str, Any]:
        return {
            "batches_sent": int(c.hget(keys.counts, "sent") or 0),
            "batches_in_flight": in_flight(c, keys, partitions),
            "ended": bool(c.get(keys.done)),
            "redis_used_memory_bytes": int(c.info("memory")["used_memory"]),
        }

    return link.call("reading the status", read)
