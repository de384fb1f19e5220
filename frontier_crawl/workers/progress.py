"""The workers' progress as the coordinator sees it: each worker's latest snapshot, taken from
their shared queue, merged (``merge.merge_progress``) and shown every ``progress_interval_s``;
and the status's pages over time (:class:`History`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.context import SpawnContext
from typing import Any

from frontier_crawl.control.status import HISTORY_EVERY_S, HISTORY_S
from frontier_crawl.workers.merge import merge_progress

Show = Callable[[dict[str, Any]], None]


class ProgressFeed:
    """The workers' progress snapshots (see the module). ``queue`` is None when nobody reads
    them: no ``on_progress`` (or no interval) and no cluster, whose live summary they feed."""

    __slots__ = ("_next", "_on_progress", "_snaps", "every", "queue")

    def __init__(
        self, ctx: SpawnContext, on_progress: Show | None, every_s: float, cluster: bool
    ) -> None:
        self._on_progress = on_progress
        self.every = every_s if on_progress is not None and every_s > 0 else 0.0
        self.queue: Any = ctx.Queue() if self.every or cluster else None
        self._snaps: dict[int, dict[str, Any]] = {}  #: each worker's latest snapshot
        self._next = time.monotonic() + self.every

    def take(self) -> None:
        """Take the snapshots the workers sent since the last call."""
        if self.queue is None:
            return
        with contextlib.suppress(Exception):  # queue.Empty, or a worker gone mid-message
            while not self.queue.empty():
                snap = self.queue.get_nowait()
                self._snaps[int(snap.get("worker", 0))] = snap

    def due(self, now: float) -> bool:
        """Is it time to show the progress (and is anybody shown it)? Then the next is due
        ``every`` seconds from ``now``."""
        if now < self._next or self._on_progress is None or not self.every:
            return False
        self._next = now + self.every
        return True

    def merged(self) -> dict[str, Any]:
        return merge_progress(list(self._snaps.values()))

    def latest(self) -> dict[str, Any]:
        """The latest snapshots merged ({} before the first)."""
        return self.merged() if self._snaps else {}

    def show(self, merged: dict[str, Any]) -> None:
        if self._on_progress is not None:
            self._on_progress(merged)


class History:
    """The crawl's pages and revisits over time, one point per status asked for (every
    ``HISTORY_EVERY_S`` at most, over the last ``HISTORY_S``): the status's ``history``. The
    control API's threads ask for it concurrently."""

    __slots__ = ("_lock", "_points")

    def __init__(self) -> None:
        self._points: deque[tuple[float, int, int]] = deque()  #: (wall time, pages, revisits)
        self._lock = threading.Lock()

    def add(self, pages: int, revisits: int, *, answered: bool) -> list[list[float]]:
        """A point now if one is due (and some worker ``answered``); the points kept."""
        with self._lock:
            history, now = self._points, time.time()
            if answered and (not history or now - history[-1][0] >= HISTORY_EVERY_S):
                history.append((round(now, 3), pages, revisits))
                while now - history[0][0] > HISTORY_S:
                    history.popleft()
            return [list(point) for point in history]
