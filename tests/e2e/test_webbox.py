"""A crawl of the web in a box (bench/webbox/) at CI size: 10^4 host names, real DNS.

bench/webbox_run.py runs everything in private network and mount namespaces (root only;
skipped where they cannot be made): the generator on 0.0.0.0:80 with every host address
(198.18.0.0/15) local, the name server on 127.0.0.1:53 the only one resolv.conf names. The
crawl resolves every host through it (so NXDOMAIN and unanswered names are real DNS failures)
and meets the generated web's slow, throttling (429), resetting and never-answering hosts and
its missing, failing, slow and Crawl-delay robots.txt files.

The crawl uses the defaults except for these settings, each shortened for time:

* ``crawl.max_depth = 1``: the 60 seeds' pages and what they link to (a few thousand URLs
  over about a thousand hosts); the whole web, about 130,000 pages, would take an hour;
* ``politeness.min_delay_s = 0.05`` (default 1): a seed host has 30-60 links of its own;
* ``politeness.max_crawl_delay_s = 1`` (default 0, any): Crawl-delays of 2-10 s;
* ``politeness.backoff_s = 0.2`` (default 5, doubling) and ``fetch.retry_backoff_s = 0.2``
  (default 2, doubling): hosts whose names fail and URLs answered 429 or reset are retried;
* ``politeness.robots_retry_s = 0.2`` (default 30) and ``politeness.robots_attempts = 2``
  (default 4): failing robots.txt files, and those of hosts that never answer;
* ``fetch.timeout_s = 5`` and ``fetch.connect_timeout_s = 5`` (defaults 30 and 10): hosts
  that never answer;
* resolv.conf ``options timeout:1 attempts:1`` (glibc's defaults: 5 s, 2 attempts): names
  whose server never replies.

The checks read the generator's own request log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bench.webbox import access, netns
from bench.webbox.model import Web

_ROOT = Path(__file__).resolve().parents[2]
HOSTS, SEEDS = 10_000, 60
SHORTENED = [
    "crawl.max_depth=1", "politeness.min_delay_s=0.05", "politeness.max_crawl_delay_s=1",
    "politeness.backoff_s=0.2", "fetch.retry_backoff_s=0.2", "politeness.robots_retry_s=0.2",
    "politeness.robots_attempts=2", "fetch.timeout_s=5", "fetch.connect_timeout_s=5",
]  # fmt: skip

#: more throttling (429) and resetting hosts than the model's default, so that a crawl of about a
#: thousand hosts meets them
SHARES: dict[str, Any] = {"throttle": 0.1, "reset": 0.05}

_why = netns.unavailable()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"network namespace: {_why}")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("webbox")
    cmd = [sys.executable, str(_ROOT / "bench" / "webbox_run.py"), "--hosts", str(HOSTS),
           "--seeds", str(SEEDS), "--web", json.dumps(SHARES), "--duration", "0", "--interval", "2",
           "--resolv-options", "timeout:1 attempts:1", "--work-dir", str(work)]  # fmt: skip
    for item in SHORTENED:
        cmd += ["--set", item]
    proc = subprocess.run(cmd, cwd=_ROOT, capture_output=True, text=True, timeout=80, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work


def crawl_log(work: Path) -> list[dict[str, object]]:
    lines = (work / "crawl" / "crawl.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def host_target(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname or "", (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


@pytest.mark.timeout(120)
def test_webbox_crawl_is_exact(run: Path) -> None:
    web = Web(1, HOSTS, **SHARES)
    report = json.loads((run / "crawl" / "report.json").read_text())
    assert report["complete"], report
    requests = access.read_requests(run / "generator")
    entries = crawl_log(run)
    pages = [e for e in entries if e["outcome"] != "robots-txt"]
    assert len(pages) > 1000, len(pages)

    # no URL fetched twice (final answers; retried 429/5xx/resets aside)
    assert access.duplicates(requests) == {}

    # every host's robots.txt asked before any of its pages
    first_robots: dict[str, float] = {}
    for r in requests:
        if r.target == "/robots.txt":
            first_robots.setdefault(r.host, r.t)
        else:
            assert r.host in first_robots and first_robots[r.host] < r.t, r

    # what the crawl log records is what the generator served
    answers: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in requests:
        answers[(r.host, r.target)].append(r.status)
    hosts_asked = {r.host for r in requests}
    counts: dict[str, int] = defaultdict(int)
    for e in entries:
        host, target = host_target(str(e["url"]))
        info = web.host_info(web.index(host) or 0)
        served = answers.get((host, target), [])
        if info.dns != "ok":  # its robots.txt fails DNS, its pages are robots-unavailable
            quiet = ("robots-unavailable", "max-depth")
            assert e["error"] == "dns-error" or e["outcome"] in quiet, e
            assert host not in hosts_asked, e
            counts["dns"] += e["error"] == "dns-error"
        elif e["outcome"] == "robots-txt" or e["outcome"] == "max-depth":
            continue
        elif e["outcome"] in ("robots-denied", "robots-unavailable"):
            counts[str(e["outcome"])] += 1
            assert not served, e
        elif e["status"]:
            assert served and served[-1] == str(e["status"]), (e, served)
            counts[str(e["status"])] += 1
            # its Retry-After (1-4 s) held the host beyond its politeness delay, unless that
            # delay was as long (a Crawl-delay, capped at 1 s here): held_s counts only beyond it
            if "429" in served and float(e["held_s"]) > 0:  # type: ignore[arg-type]
                counts["held-by-429"] += 1
        elif e["outcome"] == "failed":
            counts[f"failed-{e['error']}"] += 1
            assert served and set(served) <= {"RST", "---", "200", "429"}, (e, served)
            assert info.kind in ("reset", "never", "slow"), (e, info)
    # every URL the generator was asked for has its line, robots.txt files theirs
    logged = {host_target(str(e["url"])) for e in entries}
    assert {url for url in answers if url[1] != "/robots.txt"} <= logged
    assert hosts_asked <= {host_target(str(e["url"]))[0] for e in entries
                                        if e["outcome"] == "robots-txt"}  # fmt: skip
    # the crawl's name lookups went to the box's name server, and only there
    dns = json.loads((run / "summary.json").read_text())["dns_server"]
    assert dns["foreign"] == 0 and dns["a"] >= len(hosts_asked), dns
    print(dict(counts))
    assert counts["404"] > 0 and counts["dns"] > 0 and counts["200"] > 1000, dict(counts)
    assert counts["held-by-429"] > 0 and any(r.status == "RST" for r in requests), dict(counts)
    assert any(k.startswith("failed-") for k in counts), dict(counts)
    assert counts["robots-denied"] > 0, dict(counts)
