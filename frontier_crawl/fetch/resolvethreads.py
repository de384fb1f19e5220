"""The size of libcurl's DNS resolver thread pool, which pycurl does not expose.

libcurl 8.20 and newer resolve names (threaded resolver) in a pool of at most
``CURLMOPT_RESOLVE_THREADS_MAX`` threads per multi handle, 20 by default; lookups beyond that
wait in a queue. A lookup whose name server never answers holds its thread for the system
resolver's own timeout (glibc: 5 s per attempt, 2 attempts, A and AAAA in parallel) even after
libcurl gave up on it at the connect timeout. A broad crawl looks up hundreds of new names a
second, so a share of dead name servers as small as 0.3% keeps 20 threads busy: every other
lookup then waits behind them, and every fetch slot with it (on the web in a box, 10^6 hosts:
all 256 transfers stuck for 10 s at a time, nothing fetched). The pool is therefore sized to
the fetch concurrency: each transfer in flight has at most one lookup.

pycurl (up to 7.49) rejects the option as unknown, so it is set through libcurl's own
``curl_multi_setopt`` with ctypes, on the ``CURLM*`` pycurl keeps in its multi object (after
``PyObject_HEAD``, its attribute dict and its weak reference list). The pointer is used only
if what it points at starts with libcurl's multi handle magic number; otherwise, or when
libcurl is older than the option (``CURLM_UNKNOWN_OPTION``: then each lookup has a thread of
its own, unbounded, as before 8.20) or is not found, nothing is set and False is returned.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import pycurl

__all__ = ["set_resolve_threads"]

log = logging.getLogger(__name__)

CURLMOPT_RESOLVE_THREADS_MAX = 20  #: CURLOPTTYPE_LONG + 20 (curl/multi.h, libcurl 8.20)
_CURLMULTI_MAGIC_NUMBER = 0x000BAB1E  #: lib/api.h: the first field of a CURLM
_CURLM_OK = 0
#: where pycurl's CurlMultiObject keeps its CURLM*: after PyObject_HEAD (refcount, type),
#: ``dict`` and ``weakreflist`` (pycurl.h, unchanged since 7.43)
_HANDLE_OFFSET = 4 * ctypes.sizeof(ctypes.c_void_p)
_LAYOUT_KNOWN = "PycURL/7.4"  #: the pycurl versions whose layout that is (7.43 to 7.49)

_setopt: ctypes._CFuncPtr | None = None  # type: ignore[name-defined]
_looked_up = False


def _libcurl_setopt() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """``curl_multi_setopt`` of the libcurl pycurl is linked with (found among the mapped
    files of this process: pycurl's wheel carries its own copy), or None."""
    global _setopt, _looked_up
    if _looked_up:
        return _setopt
    _looked_up = True
    paths: list[str] = []
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if "/libcurl" in path and path not in paths:
                paths.append(path)
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            func = lib.curl_multi_setopt
        except (OSError, AttributeError):
            continue
        func.restype = ctypes.c_int
        func.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long]
        _setopt = func
        break
    return _setopt


def set_resolve_threads(multi: pycurl.CurlMulti, threads: int) -> bool:
    """Let libcurl's resolver use up to ``threads`` threads for ``multi`` (module docstring).
    True if libcurl took the setting."""
    if not isinstance(multi, pycurl.CurlMulti) or threads < 1:
        return False
    if not pycurl.version.startswith(_LAYOUT_KNOWN):
        log.debug(
            "pycurl %s may keep its handle elsewhere: resolver threads left as is", pycurl.version
        )
        return False
    setopt = _libcurl_setopt()
    if setopt is None:
        log.debug("libcurl not found among the mapped files: resolver threads left as is")
        return False
    handle = ctypes.c_void_p.from_address(id(multi) + _HANDLE_OFFSET).value
    if not handle or ctypes.c_uint32.from_address(handle).value != _CURLMULTI_MAGIC_NUMBER:
        log.debug("pycurl's multi object has another layout: resolver threads left as is")
        return False
    code = int(setopt(handle, CURLMOPT_RESOLVE_THREADS_MAX, threads))
    if code != _CURLM_OK:
        log.debug("libcurl did not take CURLMOPT_RESOLVE_THREADS_MAX (code %d)", code)
        return False
    return True
