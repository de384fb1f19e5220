"""The container's command line, run as a process (no Docker engine is needed): the Dockerfile's
ENTRYPOINT and CMD, read from the Dockerfile itself, with only the config path changed (a volume
mount's job). tini runs first, as PID 1 does in the container; the signals are those a container
gets: SIGTERM to tini alone (``docker stop``) and to the whole process group. Either way the crawl
stops once (one "received SIGTERM", never "second signal"), writes its report and exits 0, and
no process of it is left."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site
from tests.conftest import children_of, crawl_config, running
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
#: where the image reads its config (CMD); the test's own crawl.toml stands in for the mount
IMAGE_CONFIG = "/etc/frontier-crawl/crawl.toml"


def dockerfile_command() -> list[str]:
    """ENTRYPOINT + CMD of the Dockerfile's last stage (both in exec form, JSON arrays)."""
    text = (ROOT / "Dockerfile").read_text()
    final = text.rsplit("\nFROM ", 1)[1]
    found = {
        m.group(1): json.loads(m.group(2))
        for m in re.finditer(r"^(ENTRYPOINT|CMD) (\[.*\])$", final, re.MULTILINE)
    }
    return [*found["ENTRYPOINT"], *found["CMD"]]


def test_dockerfile_shape() -> None:
    """Non-root, the output directory a volume, tini forwarding to the crawler's group."""
    text = (ROOT / "Dockerfile").read_text()
    final = text.rsplit("\nFROM ", 1)[1]
    assert re.search(r"^USER crawler$", final, re.MULTILINE)
    assert re.search(r'^VOLUME \["/crawl"\]$', final, re.MULTILINE)
    command = dockerfile_command()
    assert command[:4] == ["/usr/bin/tini", "-g", "--", "frontier-crawl"]
    assert command[4:] == ["--config", IMAGE_CONFIG]


def tree(pid: int) -> set[int]:
    """``pid`` and its descendants alive now."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if running(p):
            found.add(p)
            try:
                todo += children_of(p)
            except OSError:
                continue
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("target", ["tini", "group"])
def test_entrypoint_stops_once_on_sigterm(
    tmp_path: Path, e2e_site: tuple[Site, DemoServer], target: str, processes: int
) -> None:
    tini = shutil.which("tini")
    if tini is None or not Path("/usr/bin/tini").exists():
        pytest.skip("tini is not installed at /usr/bin/tini (apt-get install tini; .ci/run does)")
    site, server = e2e_site
    # min_delay_s 0.02 -> 0.2: the crawl must still be running when the signal comes
    cfg = crawl_config(
        tmp_path, site, server.port,
        politeness={"min_delay_s": 0.2}, workers={"processes": processes},
    )  # fmt: skip
    command = [str(cfg) if arg == IMAGE_CONFIG else arg for arg in dockerfile_command()]
    assert str(cfg) in command
    bindir = Path(sys.executable).parent  # this venv's frontier-crawl, as the image's PATH has
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        # tini is PID 1 in the container; here it registers as the children's reaper instead
        "TINI_SUBREAPER": "1",
    }
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,  # its own group, as the container's processes are
    )  # fmt: skip
    out = tmp_path / "out"
    logs = [out / "crawl.jsonl"] if processes == 1 else [
        out / f"worker-{i}" / "crawl.jsonl" for i in range(processes)
    ]

    def fetched() -> int:
        return sum(len(p.read_bytes().splitlines()) for p in logs if p.exists())

    try:
        wait_until("pages fetched", lambda: fetched() >= 20, 60, alive=proc)
        pids = tree(proc.pid)
        assert len(pids) >= 2, "tini and the crawler"
        if target == "tini":  # docker stop: SIGTERM to PID 1 only
            os.kill(proc.pid, signal.SIGTERM)
        else:  # every process of tini's group at once
            os.killpg(proc.pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    text = stderr.decode(errors="replace")
    assert proc.returncode == 0, text
    assert len(re.findall(r"received SIGTERM", text)) == 1, text
    assert "second signal" not in text, text
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is False  # stopped, not finished
    assert fetched() < len(site.seeds(server.port)) + site.spec.pages
    wait_until("no process of the crawl left", lambda: not any(running(p) for p in pids), 10)
    del stdout
