"""The fetcher's idle connections and the open-file limit (fetch/fetcher.py ``_fd_room``): the
soft limit is raised towards the hard one for them, and the idle share cut to what fits. Each
case runs in a child process, whose limits it changes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)


def room(soft: int, hard: int, concurrency: int, idle: int) -> tuple[int, int]:
    """(idle connections granted, the soft limit after) in a child started with those limits."""
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))
        from frontier_crawl.fetch.fetcher import _fd_room
        granted = _fd_room({concurrency}, {idle})
        print(granted, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=30).stdout.split()  # fmt: skip
    return int(out[0]), int(out[1])


def test_the_soft_limit_is_raised_for_the_idle_connections() -> None:
    # 256 transfers + 1,024 idle + 512 for the rest: 1,792 files, within a hard limit of 4,096
    assert room(1024, 4096, 256, 1024) == (1024, 1792)


def test_a_low_hard_limit_cuts_the_idle_connections() -> None:
    assert room(1024, 1024, 256, 1024) == (256, 1024)
    assert room(600, 600, 256, 1024) == (0, 600)  # not even the transfers' own: none idle


def test_a_high_soft_limit_is_left_as_it_is() -> None:
    assert room(20000, 20000, 256, 1024) == (1024, 20000)
