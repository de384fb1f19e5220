"""The cluster seen as one: each node's live summary in Redis, and the view any node (or the
``report`` command) builds from them.

Publishing (:func:`publish_summary`, from each coordinator's loop, every
:func:`summary_every`: a second, or a third of ``cluster.heartbeat_ttl_s`` if that is less).
Key ``<prefix>:live:<n>``, a hash: ``s`` the node's summary (JSON, at most
:data:`MAX_SUMMARY_BYTES`: its state, pages, pages/s, queued, in flight, hosts, bottleneck,
worker count, machine and PID, the nodes it waits for; no URL, no host crawled, no secret),
``at`` the Redis time it was written (``TIME``, so that durations never depend on the
machines' clocks), ``joined`` the Redis time of the first summary of this run, ``run`` the run
id. A TTL of :data:`LIVE_TTL_S` (renewed by every write): a crawl abandoned leaves nothing
behind for long. One Lua script writes it; a full Redis (``maxmemory``) refuses it and the
summary is skipped, never waited for, and not counted into the full-Redis fault (the node's
other calls decide when a full Redis is fatal, :class:`~frontier_crawl.cluster.client.ClusterFull`:
an optional write must not stop a node that is still crawling).

Reading (:func:`read_view`): one pipelined round trip: ``TIME``, every node's live hash and
membership TTL, the length of every partition stream, ``done``, the nodes with a published
report. :func:`build_view` (pure) turns that into the view:

* a node is **alive** (its summary's state: ``starting``, ``running``, ``paused``,
  ``stopping``) while its membership key lives and its last summary is at most
  ``silent_after_s`` old (3 s, or three summary intervals if longer);
* **silent** once its membership has lapsed or its summary is older than that, without having
  said it left (a node killed with -9, a machine gone, a process hung); ``for_s`` is the age of
  its last summary;
* **finished** / **stopped**: its last summary was its last word (the crawl over; a signal or
  a failure); ``for_s`` since then;
* **never-joined**: no summary, no report; ``for_s`` is how long the longest-running node
  has run without it (None if no node runs).

Every node not alive while the crawl is not over is **missing**; the crawl cannot end without
it and links for its hosts wait in its streams (``batches_waiting``).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from frontier_crawl.cluster.client import Keys, Redis, refused_for_memory

if TYPE_CHECKING:  # imported where used (client.py says why)
    import redis

#: at most this many bytes of JSON per node summary (the bottleneck sentence is cut first)
MAX_SUMMARY_BYTES: Final = 1024
DETAIL_CHARS: Final = 240
LIVE_TTL_S: Final = 86_400.0
#: a node whose summary is this old (or three of its intervals, if longer) is silent
SILENT_MIN_S: Final = 3.0
SUMMARY_EVERY_MAX_S: Final = 1.0
RATE_WINDOW_S: Final = 10.0
ALIVE: Final = ("starting", "running", "paused", "stopping")
FINAL: Final = ("finished", "stopped")

_PUBLISH = """
local t = redis.call('TIME')
local now = string.format('%d.%06d', tonumber(t[1]), tonumber(t[2]))
if redis.call('HGET', KEYS[1], 'run') ~= ARGV[2] then
  redis.call('HSET', KEYS[1], 'run', ARGV[2], 'joined', now)
end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'at', now)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


def summary_every(heartbeat_ttl_s: float) -> float:
    """Seconds between two summaries of a node (never slower than its heartbeat)."""
    return min(SUMMARY_EVERY_MAX_S, heartbeat_ttl_s / 3)


def live_key(keys: Keys, node: int) -> str:
    return f"{keys.prefix}:live:{node}"


def make_summary(
    *,
    node: int,
    state: str,
    pages: int,
    pages_per_s: float,
    queued: int,
    in_flight: int,
    hosts: int,
    bottleneck: Mapping[str, str],
    workers: int,
    every_s: float,
    machine: str,
    pid: int,
    waiting_for: Sequence[int] = (),
) -> bytes:
    """A node's summary as published, JSON of at most :data:`MAX_SUMMARY_BYTES`."""
    summary: dict[str, Any] = {
        "node": node,
        "state": state,
        "pages": int(pages),
        "pages_per_s": round(float(pages_per_s), 2),
        "queued": int(queued),
        "in_flight": int(in_flight),
        "hosts": int(hosts),
        "bottleneck": {
            "name": str(bottleneck.get("name", ""))[:32],
            "detail": str(bottleneck.get("detail", ""))[:DETAIL_CHARS],
        },
        "workers": int(workers),
        "every_s": round(float(every_s), 3),
        "machine": machine[:64],
        "pid": int(pid),
        "waiting_for": [int(n) for n in waiting_for][:16],
    }
    text = json.dumps(summary, separators=(",", ":")).encode()
    if len(text) > MAX_SUMMARY_BYTES:  # (a detail of multi-byte characters)
        summary["bottleneck"]["detail"] = ""
        text = json.dumps(summary, separators=(",", ":")).encode()
    return text


def publish_summary(
    link: Redis, keys: Keys, node: int, run: str, summary: bytes
) -> bool:
    """Write the node's summary (module docstring); False, at once, if Redis is full."""
    key = live_key(keys, node)
    ttl_ms = int(LIVE_TTL_S * 1000)

    def write(client: redis.Redis) -> bool:
        import redis

        try:
            client.eval(_PUBLISH, 1, key, summary, run, ttl_ms)
        except redis.ResponseError as exc:
            if refused_for_memory(str(exc)):
                return False  # not counted into the full-Redis fault: a summary is optional
            raise
        return True

    return link.call("publishing the node's summary", write)


def read_view(link: Redis, keys: Keys, nodes: int, processes: int) -> dict[str, Any]:
    """The cluster's view now (one round trip; :func:`build_view`)."""

    def read(client: redis.Redis) -> list[Any]:
        with client.pipeline(transaction=False) as pipe:
            pipe.time()
            for n in range(nodes):
                pipe.hgetall(live_key(keys, n))
                pipe.pttl(keys.member(n))
            for p in range(nodes * processes):
                pipe.xlen(keys.stream(p))
            pipe.get(keys.done)
            pipe.hkeys(keys.reports)
            return list(pipe.execute())

    raw = link.call("reading the cluster's view", read)
    seconds, micros = raw[0]
    now = float(seconds) + float(micros) / 1e6
    lives = [raw[1 + 2 * n] for n in range(nodes)]
    members = [int(raw[2 + 2 * n]) for n in range(nodes)]
    lengths = raw[1 + 2 * nodes : 1 + 2 * nodes + nodes * processes]
    waiting = [sum(int(x) for x in lengths[n * processes : (n + 1) * processes])
               for n in range(nodes)]  # fmt: skip
    done, reported = raw[-2], raw[-1]
    return build_view(
        now=now,
        lives=[_decode_live(h) for h in lives],
        members_alive=[ttl != -2 for ttl in members],
        batches_waiting=waiting,
        ended=bool(done),
        reported={int(k) for k in reported},
    )


def _decode_live(raw: Mapping[bytes, bytes] | None) -> dict[str, Any] | None:
    """A live hash as read, or None (absent, or not written by a node)."""
    if not raw:
        return None
    try:
        summary = json.loads(raw[b"s"])
        at = float(raw[b"at"])
        joined = float(raw.get(b"joined", raw[b"at"]))
    except (KeyError, ValueError, TypeError):
        return None
    if not isinstance(summary, dict):
        return None
    return {"summary": summary, "at": at, "joined": joined}


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def build_view(
    *,
    now: float,
    lives: Sequence[Mapping[str, Any] | None],
    members_alive: Sequence[bool],
    batches_waiting: Sequence[int],
    ended: bool,
    reported: set[int],
) -> dict[str, Any]:
    """The view (module docstring) from what Redis holds at (Redis time) ``now``: per node
    its live hash (decoded), whether its membership key lives, the batches in its streams."""
    rows: list[dict[str, Any]] = []
    for n, live in enumerate(lives):
        row: dict[str, Any] = {
            "node": n, "state": "never-joined", "missing": False, "for_s": None,
            "heard_s": None, "pages": 0, "pages_per_s": 0.0, "queued": 0, "in_flight": 0,
            "hosts": 0, "bottleneck": {"name": "", "detail": ""}, "workers": 0,
            "batches_waiting": int(batches_waiting[n]), "machine": "", "pid": 0,
            "waiting_for": [], "up_s": None,
        }  # fmt: skip
        if live is None:
            if n in reported:
                row["state"] = "stopped"  # ran before; no live record left
            rows.append(row)
            continue
        s = live["summary"]
        for key in ("pages", "queued", "in_flight", "hosts", "workers", "pid"):
            row[key] = int(_num(s.get(key)))
        row["pages_per_s"] = _num(s.get("pages_per_s"))
        b = s.get("bottleneck")
        if isinstance(b, dict):
            row["bottleneck"] = {"name": str(b.get("name", "")), "detail": str(b.get("detail", ""))}
        row["machine"] = str(s.get("machine", ""))
        waits = s.get("waiting_for")
        row["waiting_for"] = [int(w) for w in waits if isinstance(w, int)] if isinstance(
            waits, list) else []  # fmt: skip
        heard = max(0.0, now - float(live["at"]))
        row["heard_s"] = round(heard, 3)
        state = str(s.get("state", "running"))
        silent_after = max(SILENT_MIN_S, 3 * _num(s.get("every_s")))
        if state in FINAL:
            row["state"], row["for_s"] = state, round(heard, 3)
        elif not members_alive[n] or heard > silent_after:
            row["state"], row["for_s"] = "silent", round(heard, 3)
        else:
            row["state"] = state if state in ALIVE else "running"
            row["up_s"] = round(max(0.0, now - float(live["joined"])), 3)
        rows.append(row)
    up = [r["up_s"] for r in rows if r["up_s"] is not None]
    for row in rows:
        if row["state"] == "never-joined" and up:
            row["for_s"] = round(max(up), 3)
        alive = row["state"] in ALIVE
        row["missing"] = not alive and not (ended and row["state"] == "finished")
    alive_rows = [r for r in rows if r["state"] in ALIVE]
    return {
        "count": len(rows),
        "ended": ended,
        "at": now,
        "alive": [r["node"] for r in alive_rows],
        "missing": [
            {"node": r["node"], "state": r["state"], "for_s": r["for_s"],
             "batches_waiting": r["batches_waiting"]}
            for r in rows if r["missing"]
        ],
        "totals": {
            "pages": sum(r["pages"] for r in rows),
            "pages_per_s": round(sum(r["pages_per_s"] for r in alive_rows), 2),
            "queued": sum(r["queued"] for r in rows if r["state"] in ALIVE or r["missing"]),
            "in_flight": sum(r["in_flight"] for r in alive_rows),
            "batches_waiting": sum(r["batches_waiting"] for r in rows),
        },
        "nodes": rows,
    }


def _secs(s: float | None) -> str:
    if s is None:
        return ""
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


def missing_phrase(entry: Mapping[str, Any]) -> str:
    """``node 2 (never joined, for 35 s)``, ``node 1 (silent for 12 s)``..."""
    state, for_s = str(entry.get("state")), entry.get("for_s")
    how = {
        "never-joined": "never joined" + (f", the cluster has run {_secs(for_s)} without it"
                                          if for_s is not None else ""),
        "silent": f"silent for {_secs(for_s)}",
        "stopped": "stopped" + (f" {_secs(for_s)} ago" if for_s is not None else ""),
        "finished": "finished" + (f" {_secs(for_s)} ago" if for_s is not None else ""),
    }.get(state, state)
    return f"node {entry.get('node')} ({how})"


def waiting_sentence(view: Mapping[str, Any], me: int | None = None) -> str:
    """What a node of the cluster waits for ("" for nothing): the missing nodes other than
    ``me``, how long, and the link batches waiting for them in Redis."""
    if view.get("ended"):
        return ""
    missing = [m for m in view.get("missing", []) if m.get("node") != me]
    if not missing:
        return ""
    batches = sum(int(m.get("batches_waiting", 0)) for m in missing)
    them = "it" if len(missing) == 1 else "them"
    return (
        "waiting for " + ", ".join(missing_phrase(m) for m in missing)
        + f": the crawl cannot end without {them}"
        + (f"; {batches} link batch{'es' if batches != 1 else ''} wait for {them} in Redis"
           if batches else "")
    )  # fmt: skip


class RateWindow:
    """Pages per second over the last :data:`RATE_WINDOW_S` (a node's own pages, sampled by
    its coordinator)."""

    def __init__(self) -> None:
        self._points: deque[tuple[float, int]] = deque()

    def add(self, now: float, pages: int) -> float:
        points = self._points
        points.append((now, pages))
        while len(points) > 2 and now - points[1][0] >= RATE_WINDOW_S:
            points.popleft()
        t0, p0 = points[0]
        return (pages - p0) / (now - t0) if now > t0 else 0.0
