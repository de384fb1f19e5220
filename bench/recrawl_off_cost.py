"""What recrawl costs when it is off: CPU per URL of the drain (``next_ready`` + ``complete``).

500 hosts x 100 URLs queued, then drained in one batch (no commit in the timing) with a zero
delay; CPU seconds (``process_time``, less sensitive than wall time to a loaded machine), best
of 7. Run it against two trees to compare, e.g. main and a branch::

    PYTHONPATH=/work/main .venv/bin/python bench/recrawl_off_cost.py
    PYTHONPATH=. .venv/bin/python bench/recrawl_off_cost.py
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import frontier_crawl
from frontier_crawl.frontier import Completion, Frontier
from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy


def drain_us() -> float:
    work = Path(tempfile.mkdtemp(prefix="fc-recrawl-off-"))
    options = FrontierOptions(allow_domains=("bench",), policy=DelayPolicy(0.0, 0.0, 0.0),
                              obey_robots=False)  # fmt: skip
    f = Frontier(work / "state", options, FrontierHooks())
    with f.batch():
        for h in range(500):
            f.add([f"http://h{h}.bench/p/{i}" for i in range(100)], depth=0)
    n, now = 0, 0.0
    t0 = time.process_time()
    with f.batch():
        while tickets := f.next_ready(now, 256):
            for t in tickets:
                f.complete(t, Completion(now, 200))
            n += len(tickets)
            now += 0.001
    spent = time.process_time() - t0
    f.close()
    shutil.rmtree(work, ignore_errors=True)
    return spent / n * 1e6


def main() -> None:
    runs = [drain_us() for _ in range(7)]
    print(f"{frontier_crawl.__file__}: best {min(runs):.2f} us of CPU per URL, "
          f"all {[round(r, 2) for r in runs]}")  # fmt: skip


if __name__ == "__main__":
    main()
