"""The schedule of a continuous crawl (``[recrawl] enabled``): when each fetched URL is due again.

Policy (pure functions, as Heritrix's ``WaitEvaluator`` and Nutch's ``AdaptiveFetchSchedule``):

* Every final visit of a URL is one of :data:`KINDS` (:func:`visit_kind`): ``new`` (its first
  visit, whatever the answer), ``changed``, ``unchanged`` (a 2xx whose payload digest equals the
  last capture's), ``not_modified`` (304), ``gone`` (404, 410) or ``failed`` (no response, 429,
  5xx, after the fetch's own retries). A 3xx or another 4xx is ``unchanged`` when its status and
  redirect target are those of the previous visit, ``changed`` otherwise: a redirect is
  scheduled like a page (its target goes through the frontier as a new URL, as today).
* :func:`next_interval`: ``new`` -> the rule's initial interval; ``unchanged``, ``not_modified``
  and ``gone`` -> interval x ``unchanged_factor``; ``changed`` -> interval x ``changed_factor``;
  ``failed`` -> the interval it had (back to the schedule, no adaptation: an outage says nothing
  about how often the page changes). Always clamped to the rule's ``[min, max]``.
* Rules (:class:`RecrawlPolicy`): the first ``[[recrawl.rules]]`` pattern searched in the
  canonical URL sets its bounds, else ``[recrawl]``'s; they are looked up at every visit, so a
  changed config applies from each URL's next visit.
* Gone: 404/410 ``gone_visits`` visits in a row (its first visit included) and the URL leaves
  the schedule (its record is deleted; a link found later does not bring it back, the seen-set
  remembers it); any other answer resets the count. ``gone_visits = 0``: never dropped.
* The next visit is due ``interval`` after this one ended (wall clock).

Names: Heritrix's ``WaitEvaluator`` has ``initial-``, ``min-`` and ``max-wait-interval-seconds``
and an ``unchanged-factor`` of 1.5 (its ``changed-factor`` divides; here it multiplies, so
0.5 is the same rule); Nutch's ``AdaptiveFetchSchedule`` adds or subtracts rates
(``inc_rate`` 0.4, ``dec_rate`` 0.2) within ``min_interval``/``max_interval``; StormCrawler's
schedulers give errors their own interval (``fetchInterval.fetch.error``) and can stop
refetching (``fetchInterval.error = -1``), which ``failed`` and ``gone_visits`` follow here.

Mechanism (:class:`Recrawl`), two LMDB databases in the frontier's environment (created when
recrawl is first enabled; a state without them is an ordinary crawl's)::

    db b"recrawl-visits": url_digest (16 bytes, urls.py)  -> Visit, msgpack array (below)
    db b"recrawl-due":    due (u64 big-endian, epoch ms) | url_digest  -> b""
    db b"blobs" key b"recrawl:totals" -> msgpack [visits by kind (6 ints), interval counts (9)]

A :class:`Visit` holds what a revisit ticket needs (url, depth, referrer, callback, meta,
priority), the :class:`LastCapture` fields (validators of the last 2xx, the digest, WARC record
id, URI and date of the last full capture), the visit count, the interval, the due time, the
gone count, and the last status and redirect target. Every visit record has exactly one due key
(``due_key(visit.due, digest)``). The due database sorts by due time, so "what is due" is a
cursor from the start.

The pump (:meth:`Recrawl.due_batch`) reads due keys with ``due <= now`` from a remembered
position, at most ``PUMP_BATCH`` per call and ``memory`` in memory at once (loaded, handed out or
waiting to be applied): 10^7 scheduled URLs cost their LMDB pages, not RAM. One host holds at
most ``per_host`` of them (a digest starts with its host's hash, so the check needs no read): a
slow host with a backlog cannot fill the memory and starve the others. Due keys skipped for a
full host are read again once it has room (the pump goes back to the first one skipped); one
call reads at most ``PUMP_SCAN`` keys, so its cost is bounded whatever the backlog. The frontier
puts them in their host's :class:`HostRevisits` (a heap by ready time then due key, so a host's
revisits go out in due order) and hands them out through ``next_ready`` like any URL: same
robots rules, politeness, IP groups; ``revisit_share`` bounds the revisits' share of a host's
requests while it has new URLs queued (:meth:`HostRevisits.turn`). A revisit ticket's ``key`` is
its due key (24 bytes; a queue entry key is 14), its ``last`` the :class:`LastCapture`.

Durability: :meth:`Recrawl.stage` computes the next record when the frontier completes a
ticket; :meth:`Recrawl.apply` writes it (the old due key deleted, the record and its new due key
put, the totals updated) when the ticket's ``mark_done`` runs, in the same transaction. A kill
before that commit leaves the old due key (or the unfinished queue entry of a first visit): the
visit happens again. After it, the new due time and validators are on disk. A due key whose
record is missing or unreadable is a damaged state: it is logged, counted (``damaged``) and
removed, never a crash.

The wall clock can step back (a crawl run with the clock a day ahead, resumed with the right
one; an NTP correction mid-run): every due time written meanwhile is then as far in the future
as the step, however short its interval. Due times never outlive the intervals that made them:
``b"blobs"`` key ``b"recrawl:clock"`` keeps the latest wall time a commit saw, and when the
clock is found behind it (at open, or by more than ``CLOCK_SLACK_S`` during the run) every due
time further than its interval from now is brought back to now + its interval (the rule's
bounds of today, ``RecrawlPolicy.bounds_for``), a bounded number per pump call
(``_reclamp``). At every open the due keys beyond the longest interval any rule allows are
brought back the same way (none, in a state whose clock never went back: one cursor step).
"""

from __future__ import annotations

import heapq
import logging
import math
import re
import struct
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import lmdb
import msgspec

from frontier_crawl.frontier.records import LastCapture, Visit
from frontier_crawl.frontier.urls import url_digest

if TYPE_CHECKING:
    from frontier_crawl.config.settings import RecrawlSection
    from frontier_crawl.frontier.completion import Completion
    from frontier_crawl.frontier.records import Ticket

__all__ = [
    "DUE_KEY_LEN",
    "INTERVAL_BUCKETS",
    "KINDS",
    "Bounds",
    "HostRevisits",
    "LastCapture",
    "Recrawl",
    "RecrawlPolicy",
    "Visit",
    "changed",
    "decode_due_key",
    "due_key",
    "next_interval",
    "plan",
    "visit_kind",
]

log = logging.getLogger(__name__)

VISITS_DB = b"recrawl-visits"
DUE_DB = b"recrawl-due"
TOTALS_KEY = b"recrawl:totals"
CLOCK_KEY = b"recrawl:clock"  #: the latest wall time a commit saw (f64 big-endian)
#: how far behind the latest wall time seen the clock may be before due times are checked
CLOCK_SLACK_S = 1.0
_F64 = struct.Struct(">d")
DUE_KEY_LEN = 24
PUMP_BATCH = 1024  #: due keys read per pump call at most
PUMP_MEMORY = 16_384  #: revisits in memory at most (loaded, in flight, waiting to be applied)
PUMP_PER_HOST = 256  #: of them, of one host at most (so slow hosts cannot fill the memory)
PUMP_SCAN = 4096  #: due keys one pump call reads at most (skipped ones included)
DUE_NOW_CAP = 20_000  #: due keys counted for ``freshness`` at most
OVERDUE_WINDOW_S = 300.0
_U64 = struct.Struct(">Q")

#: what a visit found (the ``freshness`` visit totals, in this order)
KINDS = ("new", "changed", "unchanged", "not_modified", "gone", "failed")
#: upper bounds of the interval histogram (seconds; the last bucket is everything above)
INTERVAL_BUCKETS: tuple[float, ...] = (60, 300, 900, 3600, 21600, 86400, 604800, 2592000)


_encoder = msgspec.msgpack.Encoder()
_visit_decoder = msgspec.msgpack.Decoder(Visit)
_totals_decoder = msgspec.msgpack.Decoder(tuple[list[int], list[int]])


# ----------------------------------------------------------------------------- policy (pure)


@dataclass(slots=True, frozen=True)
class Bounds:
    """The interval bounds of a group of URLs."""

    initial_s: float
    min_s: float
    max_s: float

    def clamp(self, interval_s: float) -> float:
        return min(max(interval_s, self.min_s), self.max_s)


@dataclass(slots=True, frozen=True)
class RecrawlPolicy:
    """``[recrawl]`` as the frontier uses it: bounds by rule, factors, gone and share limits."""

    default: Bounds = Bounds(86_400.0, 3_600.0, 2_592_000.0)
    rules: tuple[tuple[re.Pattern[str], Bounds], ...] = ()
    unchanged_factor: float = 1.5
    changed_factor: float = 0.5
    gone_visits: int = 3
    revisit_share: float = 0.5

    @classmethod
    def from_settings(cls, r: RecrawlSection) -> RecrawlPolicy:
        rules = []
        for rule in r.rules:
            lo = rule.min_interval_s if rule.min_interval_s is not None else r.min_interval_s
            hi = rule.max_interval_s if rule.max_interval_s is not None else r.max_interval_s
            first = rule.initial_interval_s
            bounds = Bounds(first if first is not None else min(max(r.initial_interval_s, lo), hi),
                            lo, hi)  # fmt: skip
            rules.append((re.compile(rule.pattern), bounds))
        return cls(
            default=Bounds(r.initial_interval_s, r.min_interval_s, r.max_interval_s),
            rules=tuple(rules),
            unchanged_factor=r.unchanged_factor,
            changed_factor=r.changed_factor,
            gone_visits=r.gone_visits,
            revisit_share=r.revisit_share,
        )

    def bounds_for(self, url: str) -> Bounds:
        """The bounds of the first rule whose pattern is found in ``url``, else the default."""
        for pattern, bounds in self.rules:
            if pattern.search(url):
                return bounds
        return self.default


def changed(last: LastCapture | None, status: int, digest: bytes) -> bool | None:
    """None: a first visit; False: unchanged (304, or a 2xx whose digest equals last.digest);
    True: changed. The engine uses it to pick the WARC record; the schedule to adapt the
    interval."""
    if last is None:
        return None
    if status == 304:
        return False
    return not (200 <= status < 300 and digest and digest == last.digest)


def _failed(status: int, error: str | None) -> bool:
    return error is not None or status == 0 or status == 429 or status >= 500


def visit_kind(prev: Visit | None, status: int, error: str | None, digest: bytes,
               location: str) -> str:  # fmt: skip
    """What a final visit found, one of :data:`KINDS` (module docstring)."""
    if prev is None:
        return "new"
    if _failed(status, error):
        return "failed"
    if status in (404, 410):
        return "gone"
    if status == 304:
        return "not_modified"
    if 200 <= status < 300:
        return "unchanged" if digest and digest == prev.digest else "changed"
    same = status == prev.status and location == prev.location
    return "unchanged" if same else "changed"


def next_interval(kind: str, interval_s: float, bounds: Bounds, unchanged_factor: float,
                  changed_factor: float) -> float:  # fmt: skip
    """The interval after a visit of ``kind`` (module docstring), within ``bounds``."""
    if kind == "new" or not interval_s > 0:
        return bounds.clamp(bounds.initial_s)
    if kind == "changed":
        return bounds.clamp(interval_s * changed_factor)
    if kind == "failed":
        return bounds.clamp(interval_s)
    return bounds.clamp(interval_s * unchanged_factor)


def plan(prev: Visit | None, ticket: Ticket, c: Completion, policy: RecrawlPolicy,
         now_wall: float) -> tuple[str, Visit | None]:  # fmt: skip
    """The kind of a final visit and the URL's next record (None: it leaves the schedule)."""
    status, error = c.status, c.error
    location = c.location if 300 <= status < 400 else ""
    kind = visit_kind(prev, status, error, c.digest, location)
    gone = (prev.gone if prev is not None else 0) + 1 if status in (404, 410) else 0
    if error is None and status in (404, 410) and policy.gone_visits and gone >= policy.gone_visits:
        return kind, None
    if prev is None:
        prev = Visit(ticket.url, ticket.depth, ticket.referrer, ticket.callback, ticket.meta,
                     ticket.priority)  # fmt: skip
    bounds = policy.bounds_for(ticket.url)
    interval = next_interval(kind, prev.interval_s, bounds, policy.unchanged_factor,
                             policy.changed_factor)  # fmt: skip
    fetched = c.fetched_at or now_wall
    etag, modified = prev.etag, prev.last_modified
    digest, record_id, uri, date = prev.digest, prev.record_id, prev.uri, prev.date
    if not _failed(status, error):
        if 200 <= status < 300:  # the validators are those of the latest 2xx
            etag, modified = c.etag or "", c.last_modified or ""
            if kind != "unchanged":  # a full capture: the one revisits now refer to
                digest, uri, date = c.digest, "", fetched  # uri "": the URL itself
                record_id = c.record_id
            elif c.record_id:  # a full record written although unchanged
                record_id, uri, date = c.record_id, "", fetched
        elif status == 304:  # validators a 304 sends replace the stored ones
            etag = c.etag or etag
            modified = c.last_modified or modified
    due = now_wall + interval
    return kind, msgspec.structs.replace(
        prev, etag=etag, last_modified=modified, digest=digest, record_id=record_id, uri=uri,
        date=date, visits=prev.visits + 1, interval_s=interval, due=due, gone=gone,
        status=status, location=location, visited=now_wall,
    )  # fmt: skip


def interval_bucket(interval_s: float) -> int:
    """The index of ``interval_s`` in the histogram (``INTERVAL_BUCKETS``, then "above")."""
    for i, bound in enumerate(INTERVAL_BUCKETS):
        if interval_s <= bound:
            return i
    return len(INTERVAL_BUCKETS)


# ----------------------------------------------------------------------------- keys


def due_key(due_wall: float, digest: bytes) -> bytes:
    """``due (u64 epoch ms, big-endian) | digest``: due keys sort by due time."""
    ms = min(max(int(due_wall * 1000.0), 0), (1 << 64) - 1) if math.isfinite(due_wall) else 0
    return _U64.pack(ms) + digest


def decode_due_key(key: bytes) -> tuple[int, bytes]:
    """(due ms, digest) of a due key; ValueError if it is not one."""
    if len(key) != DUE_KEY_LEN:
        raise ValueError(f"not a due key: {key!r}")
    return _U64.unpack_from(key)[0], key[8:]


# ----------------------------------------------------------------------------- per host


class HostRevisits:
    """A host's revisits in memory: a heap of (ready, due key, attempt, visit).

    ``ready`` is 0.0 for a revisit loaded because it is due (so they go out in due order), the
    monotonic time of its retry for one that failed transiently. ``credit`` implements
    ``revisit_share`` (:meth:`turn`).
    """

    __slots__ = ("credit", "heap")

    def __init__(self) -> None:
        self.heap: list[tuple[float, bytes, int, Visit]] = []
        self.credit = 1.0

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, ready: float, key: bytes, attempt: int, visit: Visit) -> None:
        heapq.heappush(self.heap, (ready, key, attempt, visit))

    def ready_at(self) -> float:
        return self.heap[0][0] if self.heap else math.inf

    def turn(self, share: float) -> bool:
        """Does the host's next request go to a revisit, both kinds waiting? At most ``share``
        of them do: each new URL taken earns ``share / (1 - share)`` revisits, one costs 1."""
        if share >= 1.0:
            return True
        if share <= 0.0:
            return False
        if self.credit >= 1.0:
            self.credit -= 1.0
            return True
        self.credit = min(self.credit + share / (1.0 - share), 1.0 + share / (1.0 - share))
        return False


# ----------------------------------------------------------------------------- the schedule


class Recrawl:
    """The schedule in the frontier's LMDB environment (module docstring); the frontier owns
    the transactions and passes them in."""

    def __init__(self, env: lmdb.Environment, blobs: lmdb._Database, policy: RecrawlPolicy,
                 wall_clock: Callable[[], float], memory: int = PUMP_MEMORY,
                 per_host: int = PUMP_PER_HOST) -> None:  # fmt: skip
        self.policy = policy
        self._wall_clock = wall_clock
        self._memory = max(1, memory)
        self._per_host_max = max(1, per_host)
        #: host hash (a digest's first 4 bytes) -> its revisits in ``present``
        self._per_host: dict[bytes, int] = {}
        self._skip_min: bytes | None = None  #: the first due key skipped for a full host
        self._visits = env.open_db(VISITS_DB)
        self._due = env.open_db(DUE_DB)
        self._blobs = blobs
        with env.begin() as txn:
            self._totals, self._hist = self._read_totals(txn)
        self._saved = (list(self._totals), list(self._hist))  #: as of the last commit
        self._dirty = False
        #: digests of the revisits in memory (loaded, handed out, or staged): never loaded twice
        self.present: set[bytes] = set()
        #: ticket key -> (digest, kind, next record or None), applied by ``apply``
        self._staged: dict[bytes, tuple[bytes, str, Visit | None]] = {}
        #: due key -> record of each revisit handed out and not yet completed
        self.flying: dict[bytes, Visit] = {}
        self._scan_from = b""  #: the pump goes on from this due key
        self._next_due_ms = 0  #: no due key before this is unread (0: scan at the next pump)
        self._overdue: deque[tuple[float, float]] = deque(maxlen=8192)
        self.damaged = 0  #: records found missing or unreadable (dropped)
        #: the latest wall time seen (saved as CLOCK_KEY with each commit's totals)
        self._latest_wall = 0.0
        #: the next due key ``_reclamp`` looks at (None: nothing to bring back)
        self._reclamp_from: bytes | None = None
        self._reclamp_start = b""  #: where the last walk began (again from there on an abort)
        self.reclamped = 0  #: due times brought back after the clock stepped back
        with env.begin() as txn:
            raw = txn.get(CLOCK_KEY, db=blobs)
        latest = _F64.unpack(raw)[0] if raw is not None and len(raw) == _F64.size else 0.0
        now = wall_clock()
        self._latest_wall = now
        if math.isfinite(latest) and latest > now + CLOCK_SLACK_S:
            self._clock_back(now, latest)
        else:  # due keys no interval allows (a state written before CLOCK_KEY was kept)
            self._latest_wall = max(now, latest if math.isfinite(latest) else 0.0)
            self._reclamp_from = self._reclamp_start = due_key(now + self._longest_s(), b"")

    def _read_totals(self, txn: lmdb.Transaction[bytes]) -> tuple[list[int], list[int]]:
        raw = txn.get(TOTALS_KEY, db=self._blobs)
        totals, hist = [0] * len(KINDS), [0] * (len(INTERVAL_BUCKETS) + 1)
        if raw is not None:
            try:
                got_t, got_h = _totals_decoder.decode(raw)
            except msgspec.DecodeError as exc:
                log.error("recrawl totals unreadable (%s): counted again from 0", exc)
            else:
                totals[: len(got_t)], hist[: len(got_h)] = got_t[: len(totals)], got_h[: len(hist)]
        return totals, hist

    # ------------------------------------------------------------------ completion

    def stage(self, ticket: Ticket, c: Completion) -> None:
        """A ticket's final outcome: compute its next record, written by :meth:`apply` when
        the ticket is marked done (a revisit's from the record it was loaded with)."""
        if ticket.last is not None:  # a revisit: its key is its due key, ending in the digest
            prev = self.flying.pop(ticket.key, None)
            digest = ticket.key[8:]
        else:
            prev, digest = None, url_digest(ticket.url)
        kind, visit = plan(prev, ticket, c, self.policy, self._wall_clock())
        self._staged[ticket.key] = (digest, kind, visit)

    def staged(self, key: bytes) -> bool:
        return key in self._staged

    def apply(self, txn: lmdb.Transaction[bytes], key: bytes) -> None:
        """Write the staged next visit of ticket ``key`` (nothing if none is staged)."""
        staged = self._staged.pop(key, None)
        if staged is None:
            return
        digest, kind, visit = staged
        self._count(kind)
        self._replace(txn, digest, visit)
        self._release(digest)

    def _replace(self, txn: lmdb.Transaction[bytes], digest: bytes, visit: Visit | None) -> None:
        """Put ``visit`` as ``digest``'s record (None: delete it), with its one due key."""
        raw = txn.get(digest, db=self._visits)
        if raw is not None:
            old = self._decode(raw, digest)
            if old is not None:
                txn.delete(due_key(old.due, digest), db=self._due)
                self._hist[interval_bucket(old.interval_s)] -= 1
        if visit is None:
            if raw is not None:
                txn.delete(digest, db=self._visits)
        else:
            txn.put(digest, _encoder.encode(visit), db=self._visits)
            self._put_due(txn, due_key(visit.due, digest))
            self._hist[interval_bucket(visit.interval_s)] += 1
        self._dirty = True

    def _put_due(self, txn: lmdb.Transaction[bytes], key: bytes) -> None:
        txn.put(key, b"", db=self._due)
        if key < self._scan_from:  # behind the pump's position: read it from there
            self._scan_from = key
        self._next_due_ms = min(self._next_due_ms, _U64.unpack_from(key)[0])

    def _count(self, kind: str) -> None:
        self._totals[KINDS.index(kind)] += 1
        self._dirty = True

    def put_back(self, txn: lmdb.Transaction[bytes], visit: Visit, digest: bytes) -> None:
        """A revisit not made (robots.txt denies it now, its host is retired): due again after
        its interval, nothing else changes (no visit counted)."""
        due = self._wall_clock() + self.policy.bounds_for(visit.url).clamp(visit.interval_s)
        self._replace(txn, digest, msgspec.structs.replace(visit, due=due))
        self._release(digest)

    def forget(self, txn: lmdb.Transaction[bytes], digest: bytes) -> None:
        """Take a URL out of the schedule (its record and due key), e.g. out of scope now."""
        self._replace(txn, digest, None)
        self._release(digest)

    def _decode(self, raw: bytes, digest: bytes) -> Visit | None:
        try:
            return _visit_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            self.damaged += 1
            log.error("recrawl: unreadable visit record %s (%s): dropped from the schedule",
                      digest.hex(), exc)  # fmt: skip
            return None

    # ------------------------------------------------------------------ the pump

    def _release(self, digest: bytes) -> None:
        """``digest``'s revisit left memory; a host that had its fill has room again: the pump
        goes back to the first due key it skipped for a full host."""
        if digest not in self.present:
            return
        self.present.discard(digest)
        host = digest[:4]
        count = self._per_host[host] - 1
        if count:
            self._per_host[host] = count
        else:
            del self._per_host[host]
        if count == self._per_host_max - 1 and self._skip_min is not None:
            self._scan_from = min(self._scan_from, self._skip_min)
            self._skip_min = None
            self._next_due_ms = 0

    @property
    def room(self) -> int:
        return self._memory - len(self.present)

    def due_batch(self, txn: lmdb.Transaction[bytes], now_wall: float) -> list[tuple[bytes, Visit]]:
        """Due revisits not yet in memory, in due order: (due key, record), as many as there
        is room for (``memory``) and ``PUMP_BATCH`` at most. O(1) when nothing new is due."""
        if self._reclamp_from is not None:
            self._reclamp(txn, now_wall)
        room = min(self.room, PUMP_BATCH)
        now_ms = int(now_wall * 1000.0)
        if room <= 0 or self._next_due_ms > now_ms:
            return []
        out: list[tuple[bytes, Visit]] = []
        present, per_host, scanned = self.present, self._per_host, 0
        cursor = txn.cursor(db=self._due)
        pos = self._scan_from
        found = cursor.set_range(pos)
        self._next_due_ms = 1 << 64  # nothing scheduled after what this scan reads
        while found:
            key = pos = bytes(cursor.key())
            if len(key) != DUE_KEY_LEN:
                self._drop_due(cursor, key, "malformed due key")
                found = cursor.set_range(key)
                continue
            due_ms = _U64.unpack_from(key)[0]
            if due_ms > now_ms:
                self._next_due_ms = due_ms
                break
            digest = key[8:]
            if digest in present:
                pass
            elif per_host.get(digest[:4], 0) >= self._per_host_max:  # its host has its fill
                if self._skip_min is None or key < self._skip_min:
                    self._skip_min = key
            else:
                raw = txn.get(digest, db=self._visits)
                visit = self._decode(raw, digest) if raw is not None else None
                if visit is None or due_key(visit.due, digest) != key:
                    if visit is None and raw is not None:  # unreadable (counted): deleted
                        txn.delete(digest, db=self._visits)
                        self._drop_due(cursor, key, "")
                    else:
                        self._drop_due(cursor, key, "due key without its visit record")
                    found = cursor.set_range(key)
                    continue
                present.add(digest)
                per_host[digest[:4]] = per_host.get(digest[:4], 0) + 1
                out.append((key, visit))
                if len(out) >= room:
                    pos = key + b"\x00"
                    self._next_due_ms = 0  # more may be due: read on at the next pump
                    break
            scanned += 1
            if scanned >= PUMP_SCAN:
                pos = key + b"\x00"
                self._next_due_ms = 0
                break
            found = cursor.next()
        else:
            pos = pos + b"\x00" if pos else pos
        self._scan_from = pos
        return out

    def _drop_due(self, cursor: lmdb.Cursor, key: bytes, why: str) -> None:
        if why:
            self.damaged += 1
            log.error("recrawl: %s %s: dropped from the schedule", why, key.hex())
        cursor.delete()
        self._dirty = True

    def wants_pump(self, now_wall: float) -> bool:
        """Might :meth:`due_batch` find something (room in memory, something due, due times
        to bring back)?"""
        if now_wall > self._latest_wall:
            self._latest_wall = now_wall
        elif now_wall < self._latest_wall - CLOCK_SLACK_S:
            self._clock_back(now_wall, self._latest_wall)
            self._latest_wall = now_wall
        if self._reclamp_from is not None:
            return True
        return self._next_due_ms <= now_wall * 1000.0 and len(self.present) < self._memory

    # ------------------------------------------------------------------ the clock stepping back

    def _longest_s(self) -> float:
        """The longest interval any rule allows."""
        return max([self.policy.default.max_s, *(b.max_s for _p, b in self.policy.rules)])

    def _clock_back(self, now_wall: float, latest: float) -> None:
        log.warning(
            "recrawl: the wall clock is %.0f s behind the latest time this crawl saw: due "
            "times further than their interval from now are brought back to it",
            latest - now_wall,
        )
        self._reclamp_from = self._reclamp_start = due_key(now_wall, b"")
        self._next_due_ms = 0

    def _reclamp(self, txn: lmdb.Transaction[bytes], now_wall: float) -> None:
        """Bring back up to ``PUMP_SCAN`` due times from ``_reclamp_from`` on: each further
        than its interval from now becomes now + its interval (module docstring). A due time
        brought back sorts before the keys still to look at, so each is looked at once."""
        start = self._reclamp_from
        assert start is not None
        keys: list[bytes] = []
        cursor = txn.cursor(db=self._due)
        found = cursor.set_range(start)
        while found and len(keys) < PUMP_SCAN:
            keys.append(bytes(cursor.key()))
            found = cursor.next()
        self._reclamp_from = keys[-1] + b"\x00" if found else None
        now_ms = now_wall * 1000.0
        for key in keys:
            if len(key) != DUE_KEY_LEN or key[8:] in self.present:
                continue  # (malformed: the pump drops it; in memory: handed out already)
            digest = key[8:]
            raw = txn.get(digest, db=self._visits)
            visit = self._decode(raw, digest) if raw is not None else None
            if visit is None or due_key(visit.due, digest) != key:
                continue  # the pump deals with it
            bounds = self.policy.bounds_for(visit.url)
            interval = bounds.clamp(visit.interval_s if visit.interval_s > 0 else bounds.initial_s)
            if _U64.unpack_from(key)[0] > now_ms + interval * 1000.0 + 1.0:
                self._replace(txn, digest, msgspec.structs.replace(visit, due=now_wall + interval))
                self.reclamped += 1
        if self._reclamp_from is None and self.reclamped:
            log.warning("recrawl: %d due times brought back within their intervals",
                        self.reclamped)  # fmt: skip

    def take(self, key: bytes, visit: Visit, attempt: int) -> None:
        """A revisit is handed out (its first attempt counts for the overdue figures)."""
        self.flying[key] = visit
        if attempt == 0:
            now_wall = self._wall_clock()
            self._overdue.append((now_wall, max(0.0, now_wall - visit.due)))

    def next_due(self) -> float | None:
        """Wall time the pump has something to read (None: nothing scheduled beyond what is in
        memory, or no room); 0.0 when it must look (the next pump finds out)."""
        if self._reclamp_from is not None:
            return 0.0
        if self.room <= 0 or self._next_due_ms >= 1 << 64:
            return None
        return self._next_due_ms / 1000.0

    # ------------------------------------------------------------------ sitemaps

    def make_due(self, txn: lmdb.Transaction[bytes], url: str, lastmod: float) -> bool:
        """A sitemap says ``url`` (canonical) changed at ``lastmod``: due now if it is
        scheduled, not in memory, and its last visit is older. True if it became due."""
        digest = url_digest(url)
        if digest in self.present:
            return False
        raw = txn.get(digest, db=self._visits)
        if raw is None:
            return False
        visit = self._decode(raw, digest)
        if visit is None:
            return False
        seen = visit.date or visit.visited
        now = self._wall_clock()
        if not lastmod > seen or visit.due <= now:
            return False
        self._replace(txn, digest, msgspec.structs.replace(visit, due=now))
        return True

    # ------------------------------------------------------------------ transactions

    def flush(self, txn: lmdb.Transaction[bytes]) -> None:
        """Write the totals the transaction changed (the frontier calls it before commit)."""
        if self._dirty:
            txn.put(TOTALS_KEY, _encoder.encode((self._totals, self._hist)), db=self._blobs)
            txn.put(CLOCK_KEY, _F64.pack(max(self._latest_wall, self._wall_clock())),
                    db=self._blobs)  # fmt: skip

    def committed(self) -> None:
        if self._dirty:
            self._saved = (list(self._totals), list(self._hist))
            self._dirty = False

    def aborted(self) -> None:
        """The transaction was aborted: totals as of the last commit, and the pump reads the
        due index from the start (revisits applied in it are due again)."""
        self._totals, self._hist = list(self._saved[0]), list(self._saved[1])
        self._dirty = False
        self._scan_from = b""
        self._next_due_ms = 0
        if self.reclamped:  # due times brought back in it: again
            self._reclamp_from = self._reclamp_start

    # ------------------------------------------------------------------ figures

    def freshness(self, txn: lmdb.Transaction[bytes], now_wall: float) -> dict[str, object]:
        """The ``freshness`` dict (docs/continuous.md) without ``per_hour``."""
        scheduled = txn.stat(self._visits)["entries"]
        now_ms = int(now_wall * 1000.0)
        due_now, first = 0, None
        for key in _keys(txn.cursor(db=self._due)):
            due_ms = _U64.unpack_from(key)[0] if len(key) == DUE_KEY_LEN else 0
            if first is None:
                first = due_ms
            if due_ms > now_ms or due_now >= DUE_NOW_CAP:
                break
            due_now += 1
        window = [late for at, late in self._overdue if at >= now_wall - OVERDUE_WINDOW_S]
        window.sort()
        return {
            "enabled": True,
            "scheduled": scheduled,
            "due_now": due_now,
            "due_now_capped": due_now >= DUE_NOW_CAP,
            "next_due_s": None if first is None else max(0.0, first / 1000.0 - now_wall),
            "overdue_p50_s": _percentile(window, 0.5),
            "overdue_p99_s": _percentile(window, 0.99),
            "visits": dict(zip(KINDS, self._totals, strict=True)),
            "intervals": {"le_s": [*INTERVAL_BUCKETS, None], "counts": list(self._hist)},
        }

    def visit_of(self, txn: lmdb.Transaction[bytes], url: str) -> Visit | None:
        """The stored record of a canonical URL (None: not scheduled, or unreadable)."""
        digest = url_digest(url)
        raw = txn.get(digest, db=self._visits)
        return self._decode(raw, digest) if raw is not None else None


def _keys(cursor: lmdb.Cursor) -> Iterator[bytes]:
    found = cursor.first()
    while found:
        yield bytes(cursor.key())
        found = cursor.next()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]
