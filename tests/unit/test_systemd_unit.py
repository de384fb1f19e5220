"""contrib/systemd/frontier-crawl@.service: what it promises the operator (one graceful stop for
the whole unit, a restart after a crash or a resumable failure, none after a config error, a
stop timeout above the crawl's own), checked against the CLI's exit statuses and the config's
defaults, and linted by ``systemd-analyze verify`` where systemd's tools are installed."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from frontier_crawl import cli
from frontier_crawl.config.settings import CrawlSection

UNIT = Path(__file__).resolve().parents[2] / "contrib" / "systemd" / "frontier-crawl@.service"


def unit() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string(UNIT.read_text())
    return parser


def test_unit_stops_once_and_restarts_only_what_resumes() -> None:
    service = unit()["Service"]
    assert service["KillMode"] == "control-group"  # SIGTERM to all: only the main one acts
    assert service["KillSignal"] == "SIGTERM"
    assert service["Restart"] == "on-failure"  # 0 (finished, or stopped) stays stopped
    prevent = {int(s) for s in service["RestartPreventExitStatus"].split()}
    assert cli.EXIT_CONFIG in prevent  # a bad config: restarting does not mend it
    assert cli.EXIT_CALLBACKS_FAILED in prevent  # every callback failed: a restart repeats it
    assert cli.EXIT_FAILURE not in prevent  # a resumable failure: the same command resumes
    timeout_s = float(service["TimeoutStopSec"].removesuffix("s"))
    assert timeout_s > CrawlSection().stop_timeout_s  # a graceful stop is never cut short
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["ExecStart"].endswith("/frontier-crawl --config crawl.toml")


@pytest.mark.timeout(60)
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd; .ci/run does)")
    # an instance of the template, its ExecStart this venv's frontier-crawl (verify checks
    # that the program exists and is executable)
    exe = Path(sys.executable).parent / "frontier-crawl"
    text = UNIT.read_text().replace("/srv/crawls/venv/bin/frontier-crawl", str(exe))
    instance = tmp_path / "frontier-crawl@example.service"
    instance.write_text(text)
    out = subprocess.run(
        [analyze, "verify", str(instance)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and str(instance) not in out.stderr, out.stderr
