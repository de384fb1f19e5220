"""DNS failures are recorded outcomes, retried per policy; a silent resolver cannot hang a crawl.

Outside a namespace no name may reach a resolver (a lookup here goes to an outside server), so
the unresolvable name is a ``.onion`` one, which libcurl refuses itself (RFC 7686). The
resolver experiments (a name server that never answers, the DNS cache TTL, NXDOMAIN) run in a
private network namespace with its own name server on 127.0.0.1:53 (tests/hostile/netns.py);
they are skipped where namespaces cannot be made.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.config import PolitenessSection, load
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import Fetcher
from tests.conftest import render_toml
from tests.hostile.netns import netns_unavailable, run_in_netns
from tests.hostile.recording import RecordingFetcher

HAS_HOST_RETIREMENT = "max_host_errors" in PolitenessSection.__struct_fields__
UNRESOLVABLE = "http://nonexistent.onion"


def crawl(
    tmp_path: Path, seeds: list[str], retries: int, **politeness: Any
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    known = PolitenessSection.__struct_fields__
    extra = {k: v for k, v in {"backoff_s": 0.05, "delay_factor": 0.0}.items() if k in known}
    sections = {
        "crawl": {"seeds": seeds, "output_dir": "out"},
        "politeness": {"min_delay_s": 0.0, "obey_robots": False, **extra, **politeness},
        "fetch": {"connect_timeout_s": 1.0, "retries": retries, "retry_backoff_s": 0.05},
        "output": {"progress_interval_s": 0.0},
    }
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(sections))
    settings = load(path)
    fetcher = RecordingFetcher(Fetcher.from_settings(settings.fetch, settings.politeness))
    report = Engine(settings, fetcher=fetcher).run()
    lines = [json.loads(x) for x in (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()]
    return report, lines, fetcher.submitted


@pytest.mark.timeout(30)
def test_unresolvable_name_is_dns_error_retried_per_policy(tmp_path: Path) -> None:
    never_retire = {"max_host_errors": 0} if HAS_HOST_RETIREMENT else {}
    report, lines, submitted = crawl(tmp_path, [f"{UNRESOLVABLE}/"], retries=2, **never_retire)
    assert submitted == [f"{UNRESOLVABLE}/"] * 3  # the first try and two retries
    assert [(x["outcome"], x["error"], x["status"]) for x in lines] == [("failed", "dns-error", 0)]
    assert report["errors_by_kind"] == {"dns-error": 1}
    assert report["complete"] is True


@pytest.mark.timeout(30)
@pytest.mark.skipif(not HAS_HOST_RETIREMENT, reason="politeness.max_host_errors not built yet")
def test_host_retired_after_max_host_errors(tmp_path: Path) -> None:
    seeds = [f"{UNRESOLVABLE}/{i}" for i in range(6)]
    report, lines, submitted = crawl(tmp_path, seeds, retries=1, max_host_errors=3)
    assert len(submitted) == 3  # three consecutive DNS failures, then no more requests
    by_url = {x["url"]: x for x in lines}
    assert sorted(by_url) == sorted(seeds) and len(lines) == len(seeds)  # each URL once
    first = by_url[submitted[0]]
    assert (first["outcome"], first["error"]) == ("failed", "dns-error")  # retried, then failed
    # its retry waited behind the host's next URL, then went: three failures in a row retire it
    assert submitted[1] != submitted[0] and submitted[2] == submitted[0]
    retired = [x for x in lines if x["outcome"] == "host-unreachable"]
    assert len(retired) >= len(seeds) - 2
    assert report["complete"] is True


# -- in a private network namespace --------------------------------------------------------

_why_not = netns_unavailable()
netns = pytest.mark.skipif(_why_not is not None, reason=_why_not or "")


@netns
@pytest.mark.timeout(60)
def test_resolver_that_never_answers_cannot_hang_the_crawl(tmp_path: Path) -> None:
    result, wall = run_in_netns("silent", str(tmp_path / "out"))
    # two tries (retries 1), each given up at the 1 s connect timeout, 0.1 s apart
    assert [(x["outcome"], x["error"]) for x in result["lines"]] == [("failed", "dns-error")]
    assert result["queries"] >= 2  # the lookups really went to the silent server
    assert result["duration_s"] < 2 * 1.0 + 0.1 + 1.5
    # ... and the process ends too: libcurl's cleanup would wait ~10 s for glibc's resolver
    # threads (timeout 5 s x 2 attempts); the fetcher leaves that to a daemon thread
    assert wall < result["duration_s"] + 4.0, f"process took {wall:.1f} s"


@netns
@pytest.mark.timeout(60)
@pytest.mark.parametrize(("ttl", "lookups"), [(0, 4), (60, 1)])
def test_dns_cache_ttl_is_applied(ttl: int, lookups: int) -> None:
    result, _ = run_in_netns("answer", str(ttl))
    assert [tuple(r) for r in result["results"]] == [(200, "None")] * 4 + [(0, "dns-error")]
    assert result["connections"] == 4  # every fetch was a new connection
    assert result["a_queries"] == lookups


@netns
@pytest.mark.timeout(60)
def test_dns_cache_entry_expires_after_its_ttl() -> None:
    # Most transfers carry DNS_CACHE_TIMEOUT -1, so that libcurl does not walk its whole DNS
    # cache at each one (fetch/fetcher.py); the TTL must hold all the same: fetches 1 and 2
    # share one lookup, fetch 3 comes after the 1 s TTL has passed and looks the name up again,
    # fetch 4 reuses that answer.
    result, _ = run_in_netns("expire", "1")
    assert [tuple(r) for r in result["results"]] == [(200, "None")] * 4 + [(0, "dns-error")]
    assert result["connections"] == 4
    assert result["a_queries"] == 2


@netns
@pytest.mark.timeout(60)
def test_dns_cache_is_bounded_by_names_within_the_ttl() -> None:
    # libcurl's DNS cache is a hash of 23 chains, and each lookup walks one: with every name
    # of the TTL kept, a crawl of many hosts paid per lookup for all of them. When more names
    # are looked up within the TTL than the bound, the prune's lifetime shortens to keep
    # about that many (fetch/fetcher.py): 40 names against a bound of 10, and a second
    # later the first of them is no longer cached, though the TTL is 60 s.
    result, _ = run_in_netns("bound")
    assert result["statuses"] == [200] * 42
    assert result["connections"] == 42
    assert result["n0_queries"] == 2
