"""What each process imports before its first page: the coordinator of a multi-process crawl
runs no engine, so it imports none (nor the fetcher, the parser, the frontier's core), and a
1-process crawl imports no coordinator. Each check runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

import frontier_crawl.frontier as frontier_pkg


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return set(out.split())


def test_the_coordinators_process_imports_no_engine() -> None:
    loaded = _modules_after(
        "import frontier_crawl.cli, frontier_crawl.runner, frontier_crawl.workers.coordinator\n"
        "from frontier_crawl.workers import Coordinator, merge_reports, node_root"
    )
    assert "frontier_crawl.workers.coordinator" in loaded
    for heavy in ("frontier_crawl.engine", "frontier_crawl.fetch", "frontier_crawl.parse",
                  "frontier_crawl.frontier.frontier", "frontier_crawl.workers.peers",
                  "pycurl"):  # fmt: skip
        assert heavy not in loaded, heavy


def test_a_one_process_crawl_imports_no_coordinator() -> None:
    loaded = _modules_after(
        "import frontier_crawl.cli, frontier_crawl.runner, frontier_crawl.engine"
    )
    assert "frontier_crawl.engine" in loaded
    assert "frontier_crawl.workers.coordinator" not in loaded


def test_a_worker_target_imports_its_engine_when_called() -> None:
    loaded = _modules_after(
        "from frontier_crawl.workers.coordinator import _worker_entry\n"
        "from frontier_crawl.workers import Peers"
    )
    assert {"frontier_crawl.workers.peers", "frontier_crawl.engine"} <= loaded


@pytest.mark.parametrize("name", frontier_pkg.__all__)
def test_the_frontiers_names_resolve(name: str) -> None:
    value = getattr(frontier_pkg, name)
    assert getattr(value, "__name__", name) == name
    assert getattr(frontier_pkg, name) is value  # resolved once, then an attribute


def test_an_unknown_frontier_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        frontier_pkg.Nope  # noqa: B018 (the access is the test)
