"""A feed cannot be any file the crawl itself writes: what a real crawl leaves in its output_dir
(two worker processes, the control API, the WARC files, a feed) against the config's check.

A new file the crawl writes in output_dir makes this test fail until
``frontier_crawl.config.checks.CRAWL_FILES`` names it, so a feed can never be configured onto it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from frontier_crawl.cli import main
from frontier_crawl.config.checks import feed_path_problem


@pytest.mark.timeout(120)
def test_every_file_the_crawl_writes_is_refused_as_a_feed(tmp_path: Path) -> None:
    with socket.socket() as s:  # a closed loopback port: one refused request, then the end
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(f"""
extract = [{{ url = ".", fields = {{ t = "title" }} }}]
[crawl]
seeds = ["http://127.0.0.1:{port}/"]
output_dir = "out"
[politeness]
obey_robots = false
max_host_errors = 1
[fetch]
retries = 0
[output]
progress_interval_s = 0
feeds = [{{ path = "feed/items.jsonl" }}]
[workers]
processes = 2
[control]
listen = "127.0.0.1:0"
""")
    assert main(["--config", str(cfg)]) == 0
    out = tmp_path / "out"
    written = {p.relative_to(out).as_posix() for p in out.iterdir()}
    for worker in ("worker-0", "worker-1"):
        written |= {f"{worker}/{p.name}" for p in (out / worker).iterdir()}
    assert {"workers.json", "worker-0", "worker-1/warc", "report.html",
            "worker-1/feed"} <= written, written  # fmt: skip (control.* are removed at the end)
    for name in sorted(written):
        own = name.split("/", 1)[-1]  # as a feed of a worker process: inside worker-<i>/
        if own.startswith("feed"):
            continue
        assert feed_path_problem(name) is not None, name
        assert feed_path_problem(own) is not None, own
        assert feed_path_problem(f"{own}.tmp") is not None and feed_path_problem(f".{own}.x.tmp")
    assert feed_path_problem("feed/items.jsonl") is None
