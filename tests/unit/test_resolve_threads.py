"""fetch/resolvethreads.py: libcurl's resolver thread pool sized through ctypes, safely."""

from __future__ import annotations

import pycurl
import pytest

from frontier_crawl.fetch.multi import MultiLoop
from frontier_crawl.fetch.resolvethreads import set_resolve_threads


def _libcurl_version() -> tuple[int, ...]:
    return tuple(int(part) for part in pycurl.version_info()[1].split(".")[:2])


@pytest.mark.timeout(10)
def test_the_pool_is_sized_on_a_libcurl_that_has_one() -> None:
    multi = pycurl.CurlMulti()
    try:
        took = set_resolve_threads(multi, 256)
        assert took is (_libcurl_version() >= (8, 20)), pycurl.version
        loop = MultiLoop(16, resolve_threads=64)
        assert loop.resolve_threads is took
        loop.close()
        # the multi handle still works after it: a transfer added and removed
        handle = pycurl.Curl()
        handle.setopt(pycurl.URL, "http://127.0.0.1:9/")
        multi.add_handle(handle)
        multi.remove_handle(handle)
        handle.close()
    finally:
        multi.close()


@pytest.mark.timeout(10)
def test_anything_else_is_left_alone() -> None:
    assert set_resolve_threads(object(), 8) is False  # type: ignore[arg-type]
    multi = pycurl.CurlMulti()
    try:
        assert set_resolve_threads(multi, 0) is False
    finally:
        multi.close()
    assert MultiLoop(4).resolve_threads is False
