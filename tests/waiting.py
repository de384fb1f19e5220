"""The one bounded wait of the tests: poll a condition until it holds, never a fixed sleep.

Every test that waits for something another process or thread does (a crawl's pages served, a
file written whole, a process ended) waits on that condition itself, through
:func:`wait_until`: it returns as soon as the condition holds, and fails naming what it waited
for once the bound is reached, or at once when the process that should make it hold has ended.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

#: how often a condition is polled: well below any moment the tests aim at (a kill when a
#: feed passes a size, pages served at 20 to 300 a second), cheap beside the crawl it watches
EVERY_S = 0.01


def wait_until(
    what: str,
    check: Callable[[], T],
    timeout_s: float = 30.0,
    *,
    every_s: float = EVERY_S,
    alive: subprocess.Popen[Any] | Iterable[subprocess.Popen[Any]] | None = None,
    detail: Callable[[], object] | None = None,
) -> T:
    """``check()``'s first truthy value, polled every ``every_s``.

    Raises AssertionError ("timed out waiting for <what>") after ``timeout_s``, or as soon as
    a process of ``alive`` has ended before the condition held ("... ended (exit N) before
    <what>"): a crawl that ended cannot serve the pages waited for. ``detail()`` is added to
    either message (a log's tail, a count so far).
    """
    procs = [alive] if isinstance(alive, subprocess.Popen) else list(alive or ())
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        ended = [p for p in procs if p.poll() is not None]
        if ended and (value := check()):  # it held just before the process ended
            return value
        if ended:
            codes = ", ".join(f"pid {p.pid} exit {p.returncode}" for p in ended)
            message = f"a process ended ({codes}) before {what}"
        elif time.monotonic() > deadline:
            message = f"timed out after {timeout_s:g} s waiting for {what}"
        else:
            time.sleep(every_s)
            continue
        if detail is not None:
            message += f": {detail()}"
        raise AssertionError(message)
