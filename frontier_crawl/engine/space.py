"""The space guard: below ``output.min_free_bytes`` on any filesystem the crawl writes to, the
loop submits nothing new (in-flight transfers finish and are committed) until space is back,
or stops as on SIGTERM (``output.low_space_action = "stop"``)."""

from __future__ import annotations

import logging

from frontier_crawl.config.settings import OutputSection
from frontier_crawl.engine.state import LoopState
from frontier_crawl.output.space import RESUME_MARGIN, SpaceMonitor, human_bytes

log = logging.getLogger(__name__)


class SpaceGuard:
    """Pauses (or halts) the loop for lack of disk space; counts the pauses for the report."""

    def __init__(self, monitor: SpaceMonitor, run: LoopState, output: OutputSection) -> None:
        self._monitor = monitor
        self._run = run
        self._stop = output.low_space_action == "stop"
        self._paused_at = 0.0
        self.pauses = 0  #: times fetching was paused for space (this run)
        self.paused_s = 0.0  #: seconds it was

    def reconfigure(self, output: OutputSection) -> None:
        self._monitor.min_free_bytes = output.min_free_bytes
        self._stop = output.low_space_action == "stop"

    def short(self, now: float) -> bool:
        """Whether fetching is paused for lack of disk space; says so once when it pauses
        (or stops: ``run.halt``) and once when it resumes."""
        run = self._run
        low = self._monitor.check(now)
        if low is None:
            if run.low_space is not None:
                self.paused_s += now - self._paused_at
                log.info(
                    "free space is back on %s: fetching resumed after %.0f s paused",
                    run.low_space.path,
                    now - self._paused_at,
                )
                run.low_space = None
            return False
        if run.low_space is None and not run.halt:
            floor = self._monitor.min_free_bytes
            log.warning(
                "%s left on %s, below output.min_free_bytes (%s): %s",
                human_bytes(low.free_bytes),
                low.path,
                human_bytes(floor),
                "stopping (in-flight transfers finish; the same command resumes)"
                if self._stop
                else "fetching paused (in-flight transfers finish) until "
                f"{human_bytes(int(floor * (1 + RESUME_MARGIN)))} are free",
            )
            if self._stop:
                run.halt = "low-disk-space"
                return True
            run.low_space, self._paused_at = low, now
            self.pauses += 1
        return True

    def close(self, now: float) -> None:
        """At the end of the run: a pause still on is counted up to ``now``."""
        if self._run.low_space is not None:
            self.paused_s += now - self._paused_at
