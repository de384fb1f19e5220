"""The coordinator's stop signals and the deadline they set: ``crawl.stop_timeout_s`` from the
first SIGINT/SIGTERM, after which a worker still running (user code holding it) is told
(``proctree.EXPIRE_SIGNAL``: it interrupts that code and ends as after any stop,
``engine/deadline.py``) and, a grace later, killed by its PID."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess

from frontier_crawl.proctree import EXPIRE_SIGNAL, FORCE_AFTER_S

log = logging.getLogger(__name__)

#: how long a worker told its stop's deadline passed (``EXPIRE_SIGNAL``) has to end, beyond
#: the time its user code may refuse (``FORCE_AFTER_S``), before it is killed
KILL_GRACE_S = 5.0


class StopDeadline:
    """The stop signals this process received and when the first came (see the module)."""

    __slots__ = ("_since", "_timeout_s", "signals")

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self.signals = 0  #: stop signals received
        self._since = 0.0  #: when the first came (monotonic; 0: none)

    def signalled(self) -> int:
        """A stop signal came: how many so far (the first starts the deadline)."""
        self.signals += 1
        if self.signals == 1:
            self._since = time.monotonic()
        return self.signals

    def overdue(self) -> bool:
        """A stop signal came ``stop_timeout_s`` ago or more."""
        since = self._since
        return bool(since) and time.monotonic() >= since + self._timeout_s

    def join(self, procs: Sequence[BaseProcess]) -> set[int]:
        """Wait for every worker to end, the stop bounded by ``stop_timeout_s`` from the first
        stop signal (else from now, the stop ordered): a worker still alive then is told
        (``EXPIRE_SIGNAL``), and killed (SIGKILL, by its PID) if it has not ended
        ``FORCE_AFTER_S + KILL_GRACE_S`` later. Returns the indexes of the workers killed."""
        since = self._since or time.monotonic()
        deadline = since + self._timeout_s
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        late = [p for p in procs if p.exitcode is None and p.pid is not None]
        if not late:
            return set()
        log.error(
            "%s still running at the stop's deadline (crawl.stop_timeout_s): interrupting "
            "its user code", ", ".join(p.name for p in late),
        )  # fmt: skip
        for proc in late:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, EXPIRE_SIGNAL)  # type: ignore[arg-type]
        kill_at = time.monotonic() + FORCE_AFTER_S + KILL_GRACE_S
        for proc in late:
            proc.join(max(0.0, kill_at - time.monotonic()))
        killed = set()
        for slot, proc in enumerate(procs):
            if proc.exitcode is None and proc.pid is not None:
                log.error("%s did not end: killed", proc.name)
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.join()
                killed.add(slot)
        return killed
