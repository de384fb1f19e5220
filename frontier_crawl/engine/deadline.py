"""The stop's deadline: ``crawl.stop_timeout_s`` bounds every stop, whatever user code does.

The first stop of a run (a signal, ``ctl stop``, a coordinator's order, a halt for low disk
space) arms it (:meth:`StopDeadline.arm`). The loop drains the transfers in flight until then
and abandons the rest (their URLs stay queued in LMDB: fetched again on resume). But user code
can hold the loop's thread past it: a pipeline that sleeps, a callback that waits on a lock or
an Event. So the deadline is also a timer (``setitimer``: ``SIGALRM`` at the deadline, then
every ``ABANDON_EVERY_S``), whose handler runs in the main thread, between two bytecodes of that
code or interrupting its blocking call, and raises :class:`~frontier_crawl.spider.Abandoned`
into it if user code is running (``SpiderHost.abandon``). The page it handled is left
unfinished (not marked done, its items not in the feeds: fetched again on resume, items exactly
once); the loop ends at once, the final commit holds every page finished before, the report is
written, and the process exits as after any graceful stop.

User code that swallows Abandoned is interrupted again at each tick; once that has gone on for
``FORCE_AFTER_S``, the crawl winds up from inside the handler (``wind_up``: the same final
commit and report, without returning to that code) and the process exits with status 1.

A worker process ignores the terminal's signals and learns of a stop from its coordinator, which
it cannot hear while user code holds it: its coordinator sends it ``SIGUSR1`` at the deadline
(:meth:`expire`), and ``SIGKILL`` if it is still alive a while later.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from frontier_crawl.engine.state import LoopState
from frontier_crawl.proctree import FORCE_AFTER_S
from frontier_crawl.spider import Abandoned

log = logging.getLogger(__name__)

#: once the deadline passed, how often user code still running is interrupted again
ABANDON_EVERY_S = 0.25


def _nothing() -> None:
    """No user code to abandon (a crawl without a spider)."""


class StopDeadline:
    """The deadline of this run's stop (module docstring). ``abandon``: raises Abandoned into
    the user code running now, if any; ``wind_up``: the final commit, the report, and the
    process's exit (never returns)."""

    __slots__ = ("_abandon", "_first_refusal", "_over", "_previous", "_run", "_timer", "_wind_up",
                 "at")  # fmt: skip

    def __init__(
        self,
        run: LoopState,
        abandon: Callable[[], None] = _nothing,
        wind_up: Callable[[], None] = _nothing,
    ) -> None:
        self._run = run
        self._abandon = abandon
        self._wind_up = wind_up
        self.at = float("inf")  #: monotonic time of the deadline (inf: no stop yet)
        self._previous: Any = None  #: the SIGALRM handler before ours (None: ours not set)
        self._first_refusal = 0.0  #: when user code first went on past an interruption
        #: the timer set before ours (seconds left, interval) and when we took it over: given
        #: back by ``disarm`` (pytest-timeout's, in a test that runs an engine in-process)
        self._timer = (0.0, 0.0, 0.0)
        self._over = False  #: disarmed for good: the run's user code is over

    def arm(self, timeout_s: float) -> None:
        """A stop: the deadline is ``timeout_s`` from now (the first stop's holds). The timer
        is set from the main thread only (an engine run in another thread, as some tests do,
        has the loop's own check)."""
        if self.at != float("inf"):
            return
        self.at = time.monotonic() + timeout_s
        self._start(max(timeout_s, 0.001))

    def expire(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """The deadline is now (a worker's coordinator says so: ``EXPIRE_SIGNAL``'s handler)."""
        del signum, frame
        self._run.stop_requested = max(1, self._run.stop_requested)  # (an order it missed)
        self.at = min(self.at, time.monotonic())
        self._start(0.001)  # the handler below, from the timer

    def _start(self, first_s: float) -> None:
        if self._over:
            return
        try:
            if self._previous is None:
                self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
                left, every = signal.setitimer(signal.ITIMER_REAL, first_s, ABANDON_EVERY_S)
                self._timer = (left, every, time.monotonic())
            else:
                signal.setitimer(signal.ITIMER_REAL, first_s, ABANDON_EVERY_S)
        except ValueError:  # not the main thread
            pass

    def _on_alarm(self, signum: int = 0, frame: FrameType | None = None) -> None:
        del signum, frame
        self._run.past_deadline = True
        try:
            self._abandon()
        except Abandoned:
            now = time.monotonic()
            if not self._first_refusal:
                self._first_refusal = now
                log.error(
                    "stop: user code still runs at the deadline (crawl.stop_timeout_s): "
                    "interrupted; the page it handles is left unfinished, fetched again on "
                    "resume"
                )
            elif now - self._first_refusal >= FORCE_AFTER_S:
                log.error(
                    "stop: user code went on past its interruption for %.0f s: the crawl "
                    "commits what it finished, writes its report and exits around it",
                    now - self._first_refusal,
                )
                self._wind_up()
            raise

    def disarm(self) -> None:
        """No more interruptions (the user code of this run is over): the timer stopped, the
        previous SIGALRM handler back."""
        self._over = True
        if self._previous is None:
            return
        left, every, taken = self._timer
        if left > 0:  # (one due meanwhile fires at once)
            left = max(0.001, left - (time.monotonic() - taken))
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, self._previous)
            signal.setitimer(signal.ITIMER_REAL, left, every)
        except ValueError:
            return
        self._previous = None
