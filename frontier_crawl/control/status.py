"""What limits the crawl now, named from measured signals: a pure function, unit-testable.

The engine gathers :class:`Signals` cheaply (counters and time accumulators kept by its loop and
the frontier, no per-link work) at most every half second, and :func:`classify` turns them into a
:class:`Bottleneck`: one of :data:`BOTTLENECKS` and one human sentence saying why. The order of
the checks is the order of precedence:

1. ``idle`` once the crawl is finished; ``draining`` once a stop was requested (SIGTERM,
   ``POST /api/stop``, low disk space with ``low_space_action = "stop"``); ``redis-full``
   while Redis refuses this worker's link batches for other nodes for lack of memory
   (``maxmemory``: the sentence says how many wait and when the node gives up); ``paused``
   while an operator pause or low disk space holds new requests. (A cluster node's
   coordinator names ``redis-unreachable`` over all of them while Redis does not answer it:
   which Redis, since when, the error, when the node gives up.)
2. ``cpu`` when the loop is busy (not waiting in poll) most of the time: the sentence names the
   largest shares (parse, callbacks, WARC, frontier, fetch, other).
3. ``fetch`` when every fetch slot is in use (``dns`` instead when name lookups take most of the
   transfers' time).
4. Free slots and nothing to give them: the hosts that are not ready say why. The state holding
   the most hosts names it: ``politeness`` (waiting on their delay or Crawl-delay), ``backoff``
   (held by Retry-After or errors; the worst ones are named), ``robots`` (robots.txt in flight).
   Hosts blocked by the operator count as ``paused`` if nothing else is left.
   A continuous crawl (``[recrawl]``) says "revisits due: N URLs" when revisits wait on
   politeness, and ``schedule`` when nothing is queued: "next URL due in N s" (waiting for
   its revisit schedule; ``idle`` means finished) or, with revisits due, that they are being
   read from the schedule into their hosts' queues.
5. When no request has gone out for :data:`STALL_S` and none is in flight, the sentence says why
   and when the next one is due ("1 host left, next request in 600 s: its Crawl-delay").

The status JSON the engine's ``status()`` returns and ``GET /api/status`` serves is described
by :data:`STATUS_KEYS` (every key is always present).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final, Literal

BottleneckName = Literal[
    "politeness", "fetch", "cpu", "backoff", "robots", "dns", "draining", "paused", "idle",
    "redis-full", "redis-unreachable", "schedule",
]  # fmt: skip
BOTTLENECKS: Final[tuple[BottleneckName, ...]] = (
    "politeness", "fetch", "cpu", "backoff", "robots", "dns", "draining", "paused", "idle",
    "redis-full", "redis-unreachable", "schedule",
)  # fmt: skip

CrawlState = Literal["starting", "running", "paused", "stopping", "finished"]

#: the CPU shares, in the order the status lists them
SHARES: Final[tuple[str, ...]] = ("parse", "callbacks", "warc", "frontier", "fetch", "other")

#: the loop is the bottleneck when busy (not waiting in poll) at least this fraction of the time
CPU_BUSY: Final = 0.85
#: name lookups are the bottleneck when they take at least this fraction of the transfers' time
DNS_SHARE: Final = 0.5
#: no request for this long (and none in flight) is a stall that the sentence explains
STALL_S: Final = 10.0

#: the status JSON's top-level keys (``workers`` entries have all of them but ``history``)
STATUS_KEYS: Final[tuple[str, ...]] = (
    "state", "bottleneck", "elapsed_s", "pages", "pages_per_s", "revisits", "revisits_per_s",
    "this_run", "queued", "queued_memory",
    "queued_disk", "in_flight", "concurrency", "hosts", "outcomes", "busiest_hosts",
    "failing_hosts", "cpu", "history", "paused", "blocked_hosts", "host_delays", "workers",
    "freshness",
)  # fmt: skip
HOST_STATES: Final[tuple[str, ...]] = ("total", "ready", "waiting", "backoff", "robots", "blocked")


@dataclass(slots=True, frozen=True)
class HostHold:
    """One host that is not ready: why, and for how long still."""

    host: str
    #: "delay", "crawl-delay", "retry", "retry-after", "backoff", "robots" or "blocked"
    reason: str
    wait_s: float  #: seconds until it may send its next request (0 when unknown)


@dataclass(slots=True, frozen=True)
class Signals:
    """What the loop measured over the last interval (a few seconds), and where things stand."""

    state: CrawlState = "running"
    stop_requested: bool = False
    paused: bool = False  #: an operator pause
    low_space: bool = False  #: fetching held for lack of disk space
    #: why link batches for other nodes wait (the transport's sentence: a full Redis), or ""
    held_up: str = ""
    in_flight: int = 0
    concurrency: int = 1  #: fetch slots in all
    queued: int = 0  #: URLs waiting in the frontier (memory and disk)
    hosts_total: int = 0  #: hosts with something queued or in flight
    hosts_ready: int = 0
    hosts_waiting: int = 0  #: snoozed on their politeness delay or Crawl-delay
    hosts_backoff: int = 0  #: held by Retry-After or errors
    hosts_robots: int = 0  #: waiting for their robots.txt
    hosts_blocked: int = 0  #: blocked by the operator
    loop_busy: float = 0.0  #: 0..1, time not spent waiting in poll
    shares: dict[str, float] = field(default_factory=dict)  #: of the busy time, by ``SHARES``
    dns_share: float = 0.0  #: name-lookup time / transfer time of the responses just handled
    since_request_s: float = 0.0  #: seconds since the last request went out
    #: the hosts that are not ready, soonest due first (a few, for the sentence)
    holds: tuple[HostHold, ...] = ()
    #: the hosts held longest by backoff or Retry-After (a few, worst first)
    worst_backoff: tuple[HostHold, ...] = ()
    #: a continuous crawl ([recrawl]): revisits due now, and seconds until the next one is due
    #: (None: none scheduled, or recrawl off)
    revisits_due: int = 0
    next_due_s: float | None = None


@dataclass(slots=True, frozen=True)
class Bottleneck:
    """What limits the crawl now, and one sentence saying why."""

    name: BottleneckName
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "detail": self.detail}


_REASONS: Final = {
    "delay": "its politeness delay",
    "crawl-delay": "its Crawl-delay",
    "retry": "its retry of a failed URL",
    "retry-after": "its Retry-After",
    "backoff": "its error backoff",
    "dns-error": "its name does not resolve (dns-error)",
    "connect-error": "its connections fail (connect-error)",
    "tls-error": "its TLS handshakes fail (tls-error)",
    "robots": "its robots.txt",
    "blocked": "it is blocked",
}


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _secs(s: float) -> str:
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


def _next_due(seconds: float) -> str:
    return (f"next URL due in {_secs(seconds)} (a continuous crawl waiting for its next "
            "revisit)")  # fmt: skip


def _cpu_detail(sig: Signals) -> str:
    shares = sorted(((v, k) for k, v in sig.shares.items() if v > 0), reverse=True)
    parts = ", ".join(f"{k} {v:.0%}" for v, k in shares[:3])
    return f"the loop is busy {sig.loop_busy:.0%} of the time" + (f" ({parts})" if parts else "")


def _stall_detail(sig: Signals) -> str:
    """Why nothing went out for a while: how many hosts are left and when the next is due."""
    hosts = _n(sig.hosts_total, "host") + " left"
    if not sig.holds:
        return f"no request for {_secs(sig.since_request_s)}: {hosts}, none due"
    first = sig.holds[0]
    if first.reason == "blocked":
        return f"no request for {_secs(sig.since_request_s)}: {hosts}, all blocked"
    if first.reason == "robots":
        return f"{hosts}, waiting for robots.txt of {first.host}"
    who = "its" if sig.hosts_total == 1 else f"{first.host}'s"
    reason = _REASONS.get(first.reason, "its delay").replace("its ", f"{who} ", 1)
    return f"{hosts}, next request in {_secs(first.wait_s)}: {reason}"


def _dns_detail(sig: Signals) -> str | None:
    """The hosts held because their names do not resolve, named with the error, when they
    are the worst held (None when they are not)."""
    failing = [h for h in sig.worst_backoff if h.reason == "dns-error"]
    if not failing or sig.worst_backoff[0].reason != "dns-error":
        return None
    names = ", ".join(h.host for h in failing[:3]) + (", ..." if len(failing) > 3 else "")
    return (f"{_n(len(failing), 'host')} not resolving (dns-error): {names}; next try in "
            f"{_secs(failing[0].wait_s)}")  # fmt: skip


def _backoff_detail(sig: Signals) -> str:
    kinds = {h.reason for h in sig.worst_backoff}
    by = "Retry-After" if kinds == {"retry-after"} else "backoff"
    text = f"{_n(sig.hosts_backoff, 'host')} held by {by}"
    if sig.worst_backoff:
        worst = sig.worst_backoff[0]
        text += f", the worst {worst.host} for {_secs(worst.wait_s)}"
        if worst.reason not in ("backoff", "retry-after"):
            text += f" ({worst.reason})"
    return text


def classify(sig: Signals) -> Bottleneck:
    """The bottleneck the signals show (see the module docstring for the order of the checks)."""
    if sig.state == "finished":
        return Bottleneck("idle", "the crawl is finished")
    if sig.stop_requested:
        return Bottleneck(
            "draining", f"stop requested: draining {_n(sig.in_flight, 'transfer')} in flight"
        )
    if sig.held_up:
        return Bottleneck("redis-full", sig.held_up)
    if sig.paused or sig.low_space:
        why = "paused by the operator" if sig.paused else "low disk space"
        return Bottleneck("paused", f"{why}, {_n(sig.in_flight, 'transfer')} finishing")
    if sig.hosts_total == 0 and sig.in_flight == 0 and sig.queued == 0:
        if sig.revisits_due:  # a continuous crawl: due, not yet loaded into their hosts
            return Bottleneck("schedule", f"revisits due: {_n(sig.revisits_due, 'URL')}, "
                                          "being read from the schedule into their hosts' "
                                          "queues")  # fmt: skip
        if sig.next_due_s is not None:  # a continuous crawl between visits
            return Bottleneck("schedule", _next_due(sig.next_due_s))
        return Bottleneck("idle", "nothing queued and nothing in flight")
    if sig.loop_busy >= CPU_BUSY:
        return Bottleneck("cpu", _cpu_detail(sig))
    free = sig.concurrency - sig.in_flight
    if free <= 0:
        if sig.dns_share >= DNS_SHARE:
            return Bottleneck(
                "dns", f"name lookups take {sig.dns_share:.0%} of the transfers' time"
            )
        return Bottleneck("fetch", f"all {_n(sig.concurrency, 'fetch slot')} busy")
    stalled = sig.in_flight == 0 and sig.since_request_s >= STALL_S
    counts: list[tuple[int, BottleneckName]] = [
        (sig.hosts_waiting, "politeness"),
        (sig.hosts_backoff, "backoff"),
        (sig.hosts_robots, "robots"),
    ]
    held, name = max(counts, key=lambda c: c[0])
    if held == 0:
        if sig.hosts_blocked and sig.hosts_blocked >= sig.hosts_total:
            return Bottleneck("paused", f"all {_n(sig.hosts_blocked, 'host')} left are blocked")
        if sig.dns_share >= DNS_SHARE:
            return Bottleneck(
                "dns", f"name lookups take {sig.dns_share:.0%} of the transfers' time"
            )
        if sig.in_flight:
            return Bottleneck(
                "fetch",
                f"{_n(sig.in_flight, 'transfer')} in flight, {free} of "
                f"{sig.concurrency} slots free, {_n(sig.hosts_ready, 'host')} ready",
            )
        if sig.next_due_s is not None and not sig.revisits_due:
            return Bottleneck("schedule", _next_due(sig.next_due_s))
        return Bottleneck("idle", "nothing ready to fetch")
    if name == "backoff":
        dns = _dns_detail(sig)
        if dns is not None:
            return Bottleneck("dns", dns)
        detail = _backoff_detail(sig)
        return Bottleneck(name, _stall_detail(sig) if stalled and not sig.worst_backoff else detail)
    if stalled:
        return Bottleneck(name, _stall_detail(sig))
    if name == "robots":
        return Bottleneck(name, f"{_n(held, 'host')} waiting for robots.txt, {free} slots free")
    if sig.revisits_due:
        return Bottleneck(name, f"revisits due: {_n(sig.revisits_due, 'URL')}, "
                                f"{_n(held, 'host')} waiting on their delay")  # fmt: skip
    return Bottleneck(
        name, f"{_n(held, 'host')} waiting on their delay, {free} of {sig.concurrency} slots free"
    )


# ------------------------------------------------------------------------------ measuring

#: how often the loop takes a :class:`Sample` (and, when asked for, publishes a status)
SAMPLE_EVERY_S: Final = 0.5
#: the window the CPU shares and the DNS share are measured over
BUSY_WINDOW_S: Final = 5.0
#: the window of ``pages_per_s``
RATE_WINDOW_S: Final = 10.0
#: the status ``history``: one point per HISTORY_EVERY_S over the last HISTORY_S
HISTORY_EVERY_S: Final = 2.0
HISTORY_S: Final = 600.0


@dataclass(slots=True)
class LoopTimes:
    """Seconds the loop spent in each phase, accumulated (``perf_counter`` around the phases
    it already has; nothing per link). ``fetch`` is libcurl's work and result building in
    poll and submit, the wait in poll excluded; ``frontier`` is scheduling, admission,
    completion and the group commits (LMDB)."""

    parse: float = 0.0
    callbacks: float = 0.0  #: user callbacks (spiders); 0 until they exist
    warc: float = 0.0
    frontier: float = 0.0
    fetch: float = 0.0
    commit: float = 0.0  #: of ``frontier``, the group commits
    commits: int = 0
    requests: int = 0  #: requests submitted


@dataclass(slots=True, frozen=True)
class Sample:
    """The loop's accumulators at one instant (monotonic ``t``; ``wall``: Unix time)."""

    t: float
    wall: float
    pages: int
    waited: float  #: seconds blocked in poll, in all
    parse: float
    callbacks: float
    warc: float
    frontier: float
    fetch: float
    dns: float  #: name-lookup seconds of the transfers ended
    transfer: float  #: seconds of the transfers ended
    admitted: int
    revisits: int = 0


@dataclass(slots=True, frozen=True)
class Window:
    """What changed between two samples."""

    seconds: float
    loop_busy: float
    shares: dict[str, float]
    dns_share: float
    pages_per_s: float
    admitted_per_s: float
    revisits_per_s: float = 0.0


class Recorder:
    """The last samples (a ring of :data:`RATE_WINDOW_S`) and the history of pages and
    revisits (``[unix s, pages, revisits]`` over the last :data:`HISTORY_S`): a few hundred
    small records, whatever the crawl's size."""

    def __init__(self) -> None:
        self._recent: deque[Sample] = deque()
        self.history: deque[tuple[float, int, int]] = deque()

    def add(self, sample: Sample) -> None:
        recent = self._recent
        recent.append(sample)
        while len(recent) > 2 and sample.t - recent[1].t >= RATE_WINDOW_S:
            recent.popleft()
        history = self.history
        if not history or sample.wall - history[-1][0] >= HISTORY_EVERY_S:
            history.append((round(sample.wall, 3), sample.pages, sample.revisits))
            while sample.wall - history[0][0] > HISTORY_S:
                history.popleft()

    def window(self, now: Sample) -> Window:
        """The CPU shares over about :data:`BUSY_WINDOW_S` before ``now``, the rates over
        about :data:`RATE_WINDOW_S` (less early in the crawl)."""
        recent = self._recent
        if not recent:
            return Window(0.0, 0.0, dict.fromkeys(SHARES, 0.0), 0.0, 0.0, 0.0, 0.0)
        first = recent[0]
        busy_from = next((s for s in recent if now.t - s.t <= BUSY_WINDOW_S), first)
        if busy_from.t >= now.t:
            busy_from = first
        dt = now.t - busy_from.t
        loop_busy, shares, dns_share = 0.0, dict.fromkeys(SHARES, 0.0), 0.0
        if dt > 0:
            busy = max(0.0, dt - (now.waited - busy_from.waited))
            loop_busy = min(1.0, busy / dt)
            if busy > 0:
                for name in SHARES[:-1]:
                    spent = getattr(now, name) - getattr(busy_from, name)
                    shares[name] = min(1.0, max(0.0, spent / busy))
                shares["other"] = max(0.0, 1.0 - sum(shares.values()))
            transfer = now.transfer - busy_from.transfer
            dns_share = (now.dns - busy_from.dns) / transfer if transfer > 0 else 0.0
        rate_dt = now.t - first.t
        return Window(
            seconds=dt,
            loop_busy=loop_busy,
            shares=shares,
            dns_share=min(1.0, dns_share),
            pages_per_s=(now.pages - first.pages) / rate_dt if rate_dt > 0 else 0.0,
            admitted_per_s=(now.admitted - first.admitted) / rate_dt if rate_dt > 0 else 0.0,
            revisits_per_s=(now.revisits - first.revisits) / rate_dt if rate_dt > 0 else 0.0,
        )


def empty_status(state: CrawlState = "starting") -> dict[str, Any]:
    """A status with every key present and nothing counted (before the first sample)."""
    return {
        "state": state,
        "bottleneck": {"name": "idle", "detail": "the crawl is starting"},
        "elapsed_s": 0.0, "pages": 0, "pages_per_s": 0.0, "revisits": 0, "revisits_per_s": 0.0,
        "this_run": {"pages": 0, "revisits": 0, "elapsed_s": 0.0, "pages_per_s": 0.0},
        "queued": 0, "queued_memory": 0,
        "queued_disk": 0, "in_flight": 0, "concurrency": 0,
        "hosts": dict.fromkeys(HOST_STATES, 0), "outcomes": {}, "busiest_hosts": [],
        "failing_hosts": [],
        "cpu": {"loop_busy": 0.0, "shares": dict.fromkeys(SHARES, 0.0)},
        "history": [], "paused": False, "blocked_hosts": [], "host_delays": {}, "workers": [],
        "freshness": {"enabled": False},
    }  # fmt: skip
