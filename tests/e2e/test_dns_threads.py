"""Dead name servers do not hold up the crawl's other lookups (fetch/resolvethreads.py).

libcurl (8.20 and newer) resolves names in a pool of at most 20 threads by default; a name
whose server never replies holds its thread for the system resolver's own timeout (glibc's
default: 5 s, 2 attempts), longer than libcurl waits for it. At 10^6 hosts (bench/webbox_run.py)
a fraction of a percent of such names kept every thread busy, every other lookup queued behind
them, and every fetch slot stuck for 10 s at a time. The crawler sizes the pool to its fetch
concurrency.

The check: the web in a box (bench/webbox/, real DNS in a private network namespace; root
only, skipped elsewhere) with a third of its names never answered, and glibc's default
resolver timeouts. The box's name server counts the most distinct never-answered names
queried within 2 s (``peak_unanswered``): each thread works on one name and asks again only
after 5 s, so with a pool of 20 it cannot pass 20; the crawl discovers hundreds of such names
within its first seconds and, with a lookup per transfer, has far more of them pending at once.

Settings shortened for time: ``crawl.max_depth = 1`` (the seeds' links, about a thousand
hosts), ``fetch.connect_timeout_s = 3`` (default 10; still shorter than the resolver's 10 s),
``politeness.robots_attempts = 1`` (default 4): a host whose name fails is given up at once;
and the crawl is stopped (SIGTERM, a graceful stop) after 20 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.webbox import netns

_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POOL = 20  #: libcurl's CURLMOPT_RESOLVE_THREADS_MAX default

_why = netns.unavailable()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"network namespace: {_why}")


@pytest.mark.timeout(120)
def test_dead_name_servers_do_not_hold_other_lookups(tmp_path: Path) -> None:
    web = {"dns_timeout": 0.3, "nxdomain": 0.0}
    cmd = [sys.executable, str(_ROOT / "bench" / "webbox_run.py"), "--hosts", "3000",
           "--seeds", "40", "--web", json.dumps(web), "--duration", "20", "--interval", "2",
           "--work-dir", str(tmp_path),
           "--set", "crawl.max_depth=1", "--set", "fetch.connect_timeout_s=3",
           "--set", "politeness.robots_attempts=1"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=_ROOT, capture_output=True, text=True, timeout=100, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    dns = json.loads((tmp_path / "summary.json").read_text())["dns_server"]
    assert dns["foreign"] == 0, dns
    assert dns["dropped"] > 0, dns  # the crawl met names that are never answered
    assert dns["peak_unanswered"] > DEFAULT_POOL, dns
    entries = [json.loads(line) for line in (tmp_path / "crawl" / "crawl.jsonl").open()]
    assert sum(e["error"] == "dns-error" for e in entries) > DEFAULT_POOL
    assert sum(e["outcome"] == "fetched" for e in entries) > 100
