"""Per-URL cost of a host queue: ``Intake.enqueue`` (LMDB block entry, in-memory deque) and
``Frontier._pop``, with every URL at priority 0 (the common case) and with mixed priorities.

    .venv/bin/python bench/micro_queue.py [--urls 20000] [--hosts 50] [--rounds 7]

Each round queues ``--urls`` new URLs over ``--hosts`` hosts in one batch (one LMDB
transaction, as the engine's tick), then pops them all; the figure is the median of the rounds
(CPU time of this process, and the median: the machine is shared). Cases: all in memory
(memory_urls large) and spilled (memory_urls 1,000: most URLs go to LMDB and are read back).
Private methods are timed on purpose, to leave out admission (seen-set, canonicaliser),
which ``micro_admission.py`` measures. Run it against another checkout with
``PYTHONPATH=/path/to/checkout`` to compare.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from frontier_crawl.frontier import Frontier
from frontier_crawl.frontier.options import FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.store import QueueEntry
from frontier_crawl.frontier.traps import Limits


def make(state: Path, memory_urls: int) -> Frontier:
    return Frontier(
        state,
        FrontierOptions(
            allow_domains=["example.org"],
            exclude=[],
            limits=Limits(max_depth=1000),
            max_pages=0,
            policy=DelayPolicy(min_delay_s=0.0),
            connections_per_host=1,
            obey_robots=False,
            user_agent="bench",
            robots_ttl_s=3600.0,
            robots_retry_s=10.0,
            robots_attempts=2,
            max_host_errors=3,
            memory_urls=memory_urls,
            map_size=1 << 32,
        ),
    )


def one_round(
    f: Frontier, origins: list[str], n: int, priorities: list[int], first: int
) -> tuple[float, float]:
    """(us per enqueue, us per pop) of ``n`` URLs."""
    entries = [
        (origins[i % len(origins)],
         QueueEntry(f"{origins[i % len(origins)]}/p/{first + i}.html", 1, 0, 0,
                    origins[i % len(origins)] + "/", "", b"", priorities[i % len(priorities)]))
        for i in range(n)
    ]  # fmt: skip
    hosts = [f._hosts.get(o) for o in origins]
    with f.batch():
        txn = f._tx.txn
        assert txn is not None
        enqueue = f._intake.enqueue
        t0 = time.process_time()
        for origin, entry in entries:
            enqueue(txn, origin, entry, 0.0)
        t1 = time.process_time()
    hosts = [f._hosts[o] for o in origins]
    popped = 0
    with f.batch():
        pop = f._buffer.pop
        t2 = time.process_time()
        for host in hosts:
            while pop(host, 0.0) is not None:
                popped += 1
        t3 = time.process_time()
        f.mark_done(())  # nothing: the entries stay held, as in flight
    assert popped == n, (popped, n)
    return (t1 - t0) / n * 1e6, (t3 - t2) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=int, default=20_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    rnd = random.Random(1)
    mixed = [rnd.choice((-2, -1, 0, 0, 0, 1, 2, 5)) for _ in range(1000)]
    origins = [f"http://h{i}.example.org" for i in range(a.hosts)]
    for label, memory, prios in [
        ("priority 0, in memory", 10_000_000, [0]),
        ("mixed priorities, in memory", 10_000_000, mixed),
        ("priority 0, spilled (memory_urls 1000)", 1_000, [0]),
        ("mixed priorities, spilled (memory_urls 1000)", 1_000, mixed),
    ]:
        with tempfile.TemporaryDirectory() as tmp:
            f = make(Path(tmp) / "state", memory)
            adds, pops = [], []
            for r in range(a.rounds):
                add_us, pop_us = one_round(f, origins, a.urls, prios, r * a.urls)
                adds.append(add_us)
                pops.append(pop_us)
            f.close(checkpoint=False)
        print(f"{label:46s} enqueue {statistics.median(adds):6.2f} us/URL   "
              f"pop {statistics.median(pops):6.2f} us/URL")  # fmt: skip


if __name__ == "__main__":
    main()
