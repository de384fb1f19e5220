"""What an operator reads is true (issue 31, items 5, 6, 9, 10, and the log format): a name that
does not resolve named as such in the bottleneck, an output directory that cannot be made
refused by ``--check`` as by the run, a recrawl default clamped and said so, ``ctl delay`` for a
host the crawl has never seen refused, operator actions at INFO, and the log in UTC text or JSON.

Every crawl here is a real subprocess of the command line against a real server on loopback;
what is checked is what a person reads: its stderr, ``--check``'s stdout, ``ctl``'s output and
exit status, the control API's status. Settings that differ from the defaults are named where
they are set, with the reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config, render_toml
from tests.control_client import Api, ctl, start_crawl
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

#: libcurl refuses ``.onion`` names itself (RFC 7686): a dns-error with no query sent anywhere
UNRESOLVABLE = "http://nonexistent.onion/"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "frontier_crawl.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> str:
    """SIGINT to the crawl's process group (a terminal's Ctrl-C); its stderr."""
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return err.decode()


def start(cfg: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def web() -> tuple[Site, DemoServer]:
    site = Site(SiteSpec(hosts=1, pages=40, crawl_delay_s=None, seed=5, page_bytes=20_000))
    server = DemoServer(site)
    server.__enter__()
    yield site, server  # type: ignore[misc]
    server.__exit__(None, None, None)


def test_a_seed_that_does_not_resolve_is_named_in_the_bottleneck(
    tmp_path: Path, web: tuple[Site, DemoServer]
) -> None:
    """With the default robots.txt retry (robots_retry_s 30 s, doubling) a host whose name
    does not resolve waits minutes between tries: the status must say why within a minute,
    naming the host and the error, not "backoff"."""
    site, server = web
    cfg = crawl_config(tmp_path, site, server.port, control={"listen": "127.0.0.1:0"})
    text = cfg.read_text().replace("seeds = [", f'seeds = ["{UNRESOLVABLE}", ', 1)
    cfg.write_text(text)
    proc = start(cfg)
    try:
        api = Api(cfg.parent / "out")

        def named() -> dict[str, str] | None:
            # once the good host is done (only the unresolvable seed queued): before, the
            # bottleneck may name the good host's politeness delay in one status and DNS in the
            # next, as either one holds the crawl back
            status = api.status()
            b = status["bottleneck"]
            return b if b["name"] == "dns" and status["queued"] <= 1 else None

        # the good host's 40 pages take a few seconds; then only the unresolvable one is left
        bottleneck = wait_until("the bottleneck to name DNS", named, 60)
        assert "nonexistent.onion" in bottleneck["detail"]
        assert "dns-error" in bottleneck["detail"]
        failing = api.status()["failing_hosts"]
        assert any(f["host"].endswith("nonexistent.onion") and f["error"] == "dns-error"
                   for f in failing), failing  # fmt: skip
        shown = ctl(cfg, "status").stdout
        assert "dns" in shown and "nonexistent.onion" in shown, shown
    finally:
        stop(proc)


def test_check_refuses_an_output_dir_the_run_cannot_create(tmp_path: Path) -> None:
    """``--check`` passed a directory the run then failed to create (exit 1, "free space").
    /proc takes no new directory, even from root (the suite may run as root, for whom no mode
    bit refuses a mkdir)."""
    cfg = tmp_path / "crawl.toml"
    crawl = {"seeds": ["http://127.0.0.1:9/"], "output_dir": "/proc/frontier-crawl-test/out"}
    cfg.write_text(render_toml({"crawl": crawl}))
    checked = cli("--config", str(cfg), "--check")
    assert checked.returncode == 2, checked.stderr
    assert "crawl.output_dir" in checked.stderr and "cannot be created" in checked.stderr
    ran = cli("--config", str(cfg))
    assert ran.returncode == 2, ran.stderr
    assert "crawl.output_dir" in ran.stderr and "free space" not in ran.stderr
    # a creatable one passes, and --check leaves nothing behind
    fine = tmp_path / "new" / "deeper"
    cfg.write_text(render_toml({"crawl": {"seeds": ["http://127.0.0.1:9/"],
                                          "output_dir": str(fine)}}))  # fmt: skip
    assert cli("--config", str(cfg), "--check").returncode == 0
    assert not (tmp_path / "new").exists()


def test_an_unset_output_dir_is_one_per_config_file_and_named(tmp_path: Path) -> None:
    """Two config files in one folder, neither setting output_dir, are two crawls, and both
    ``--check`` and the run say where each writes."""
    for name in ("shop", "blog"):
        sections = {
            "crawl": {"seeds": ["http://127.0.0.1:9/"]},
            "fetch": {"retries": 0},  # retries 3 -> 0: one refused connect is enough here
            "politeness": {"obey_robots": False},  # no robots.txt wait for a closed port
        }
        (tmp_path / f"{name}.toml").write_text(render_toml(sections))
    checked = cli("--config", str(tmp_path / "shop.toml"), "--check")
    assert checked.returncode == 0, checked.stderr
    where = str(tmp_path / "crawls" / "shop")
    assert f"# note: crawl.output_dir is not set: this crawl writes to {where}" in checked.stdout
    assert f'output_dir = "{where}"' in checked.stdout
    for name in ("shop", "blog"):
        ran = cli("--config", str(tmp_path / f"{name}.toml"))
        assert ran.returncode == 0, ran.stderr
        assert f"writes to {tmp_path / 'crawls' / name}" in ran.stderr
        assert (tmp_path / "crawls" / name / "crawl.jsonl").exists()


def test_a_recrawl_default_outside_the_users_intervals_is_clamped(tmp_path: Path) -> None:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(render_toml({
        "crawl": {"seeds": ["http://127.0.0.1:9/"], "output_dir": "out"},
        "recrawl": {"enabled": True, "min_interval_s": 2, "max_interval_s": 40},
    }))  # fmt: skip
    checked = cli("--config", str(cfg), "--check")
    assert checked.returncode == 0, checked.stderr
    assert "initial_interval_s = 40.0" in checked.stdout
    assert "# note: recrawl.initial_interval_s (unset): its default 86400 s" in checked.stdout
    # a value the user wrote is never changed: outside the bounds it is still refused
    cfg.write_text(cfg.read_text().replace("max_interval_s = 40", "max_interval_s = 40\n"
                                           "initial_interval_s = 100"))  # fmt: skip
    refused = cli("--config", str(cfg), "--check")
    assert refused.returncode == 2 and "recrawl.initial_interval_s" in refused.stderr


def test_ctl_delay_for_an_unknown_host_is_refused_and_actions_log_at_info(
    tmp_path: Path, web: tuple[Site, DemoServer]
) -> None:
    site, server = web
    # min_delay_s 0.02 -> 0.5: the crawl of 40 pages lasts long enough to be steered
    cfg = crawl_config(tmp_path, site, server.port, control={"listen": "127.0.0.1:0"},
                       politeness={"min_delay_s": 0.5})  # fmt: skip
    proc = start_crawl(cfg)
    try:
        Api(cfg.parent / "out")
        unknown = ctl(cfg, "delay", "nosuch.host", "2")
        assert unknown.returncode == 1, (unknown.stdout, unknown.stderr)
        assert "no host named 'nosuch.host'" in unknown.stderr + unknown.stdout
        status = json.loads(ctl(cfg, "status", "--json").stdout)
        assert "nosuch.host" not in status["host_delays"]
        host = site.hosts[0]
        known = ctl(cfg, "delay", host, "0.3")
        assert known.returncode == 0 and "delay 0.3 s" in known.stdout, known.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    text = err.decode()
    line = next(x for x in text.splitlines() if "delay set to 0.3 s by the operator" in x)
    # INFO, in UTC with its zone: 2026-12-04T18:30:02.123Z INFO frontier_crawl...
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO frontier_crawl\.", line), line


def test_json_log_lines(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """``[logging] format = "json"``: every line of stderr is one JSON object with UTC time,
    level, logger and message, and a host's message carries the host as a field."""
    site, server = web
    cfg = crawl_config(tmp_path, site, server.port, control={"listen": "127.0.0.1:0"},
                       politeness={"min_delay_s": 0.5}, logging={"format": "json"})  # fmt: skip
    proc = start_crawl(cfg)
    try:
        Api(cfg.parent / "out")
        host = site.hosts[0]
        assert ctl(cfg, "block", host).returncode == 0
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    lines = [x for x in err.decode().splitlines() if x.strip()]
    records = [json.loads(x) for x in lines if x.startswith("{")]
    assert records, err.decode()
    for r in records:
        assert {"time", "level", "logger", "message"} <= r.keys(), r
        assert r["time"].endswith("Z")
    blocked = next(r for r in records if "blocked by the operator" in r["message"])
    assert blocked["level"] == "INFO" and blocked["host"] == host
