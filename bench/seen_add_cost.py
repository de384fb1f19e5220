"""``SeenSet.add_new`` alone, per call, over a seen-set of ``--stored`` digests (issue 30).

Runs against any tree (put it first on ``PYTHONPATH``): with a Bloom filter (its capacity
``--capacity``, error rate 1e-7, its bits rebuilt from LMDB as a restart does) or without.
The set is filled with ``--stored`` random 16-byte digests (sorted puts in one transaction),
then each repetition times, in one write transaction that is then aborted:

* ``new``: ``--calls`` digests never stored (fresh ones each repetition);
* ``dup``: ``--calls`` stored digests not seen by this process before (so the recent-digest
  cache does not answer them: the filter's test-and-set, then the exact put, or the put alone).

Figures are microseconds per call (CPU, and wall beside it), the median of the repetitions.

Usage::

    PYTHONPATH=. .venv/bin/python bench/seen_add_cost.py --stored 1e7 --dir /var/tmp
"""

from __future__ import annotations

import argparse
import inspect
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import frontier_crawl
from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import open_env


def make_seen(env: object, capacity: int) -> SeenSet:
    """The tree's SeenSet: sized (a Bloom filter) if its constructor takes a capacity."""
    if "capacity" in inspect.signature(SeenSet).parameters:
        return SeenSet(env, capacity, 1e-7)  # type: ignore[call-arg,arg-type]
    return SeenSet(env)  # type: ignore[arg-type]


def timed(env: object, seen: SeenSet, digests: list[bytes]) -> tuple[float, float, int]:
    """(CPU s, wall s, new answers) of ``add_new`` over ``digests`` in one aborted txn."""
    txn = env.begin(write=True)  # type: ignore[attr-defined]
    add = seen.add_new
    c0, w0 = time.process_time(), time.perf_counter()
    new = sum(add(txn, d) for d in digests)
    c1, w1 = time.process_time(), time.perf_counter()
    txn.abort()
    if hasattr(seen, "aborted"):
        seen.aborted()
    return c1 - c0, w1 - w0, new


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stored", type=float, default=1e7, help="digests in the set (1e7)")
    p.add_argument("--capacity", type=float, default=1e7, help="Bloom capacity, if any (1e7)")
    p.add_argument("--calls", type=int, default=200_000, help="add_new calls per repetition")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--dir", help="parent of the temporary LMDB (default: $TMPDIR or /tmp)")
    args = p.parse_args()
    stored, calls = int(args.stored), args.calls
    rng = random.Random(30)
    tmp = Path(tempfile.mkdtemp(prefix="seen-add-", dir=args.dir))
    print(f"package {Path(frontier_crawl.__file__).parent}, load {os.getloadavg()[0]:.2f}")
    try:
        env = open_env(tmp / "lmdb", 1 << 34)
        seen = make_seen(env, int(args.capacity))
        t0 = time.perf_counter()
        digests = sorted(rng.randbytes(16) for _ in range(stored))
        db = env.open_db(b"seen", dupsort=True, dupfixed=True)
        with env.begin(write=True) as txn:
            for d in digests:
                txn.put(d[:4], d[4:], db=db, dupdata=False)
        seen = make_seen(env, int(args.capacity))  # its count (and a tree's filter) from LMDB
        if hasattr(seen, "rebuild"):
            with env.begin() as txn:
                seen.rebuild(txn)
        print(f"filled {stored:,} digests in {time.perf_counter() - t0:.1f} s; {seen.stats()}")
        dups = rng.sample(digests, calls * args.reps)
        del digests
        figures: dict[str, list[tuple[float, float]]] = {"new": [], "dup": []}
        for rep in range(args.reps):
            fresh = [rng.randbytes(16) for _ in range(calls)]
            cpu, wall, new = timed(env, seen, fresh)
            assert new == calls, new
            figures["new"].append((cpu, wall))
            cpu, wall, new = timed(env, seen, dups[rep * calls : (rep + 1) * calls])
            assert new == 0, new
            figures["dup"].append((cpu, wall))
        for name, runs in figures.items():
            cpu = statistics.median(c for c, _ in runs) / calls * 1e6
            wall = statistics.median(w for _, w in runs) / calls * 1e6
            print(f"add_new {name}: {cpu:.2f} us CPU per call ({wall:.2f} us wall), median of "
                  f"{args.reps} x {calls:,}")  # fmt: skip
        print(f"load {os.getloadavg()[0]:.2f}")
        env.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
