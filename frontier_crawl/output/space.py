"""Free space on the filesystems a crawl writes to, against a floor (``output.min_free_bytes``).

The engine asks :meth:`SpaceMonitor.check` on every loop tick; it calls ``statvfs`` at most
once per ``interval_s`` (once per filesystem: paths are grouped by ``st_dev``) and answers from
its last look in between, so a tick pays a float comparison. Free space is what an unprivileged
writer may use (``f_bavail``), not the blocks reserved for root. Once below the floor, a
filesystem counts as low until it has the floor plus ``resume_margin`` (a tenth) free again,
so a crawl that pauses does not flap between pausing and resuming at each check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: a paused crawl resumes at min_free_bytes x (1 + this)
RESUME_MARGIN = 0.1
CHECK_INTERVAL_S = 1.0


@dataclass(slots=True, frozen=True)
class LowSpace:
    """A filesystem below the floor: one of the crawl's paths on it, and its free bytes."""

    path: Path
    free_bytes: int


class SpaceMonitor:
    """Watches the filesystems of ``paths`` (each counted once) against ``min_free_bytes``."""

    def __init__(
        self,
        paths: Iterable[Path],
        min_free_bytes: int,
        *,
        interval_s: float = CHECK_INTERVAL_S,
        resume_margin: float = RESUME_MARGIN,
    ) -> None:
        self._resume_margin = resume_margin
        self._interval_s = interval_s
        self.low: LowSpace | None = None  #: the answer of the last look
        self.min_free_bytes = min_free_bytes  # (the property: sets the resume level too)
        self.paths: list[Path] = []  #: one existing path per filesystem, the first given
        devices: set[int] = set()
        for path in paths:
            try:
                device = os.stat(path).st_dev
            except OSError:
                continue  # not created (yet): its parent is in the list
            if device not in devices:
                devices.add(device)
                self.paths.append(path)

    @property
    def min_free_bytes(self) -> int:
        return self._min_free_bytes

    @min_free_bytes.setter
    def min_free_bytes(self, floor: int) -> None:
        """A new floor (a reload): its resume level with it, and the next check looks again
        at once (a floor of 0 ends a pause there and then)."""
        self._min_free_bytes = floor
        self._resume_at = int(floor * (1 + self._resume_margin))
        self._next_at = float("-inf")
        if not floor:
            self.low = None

    def check(self, now: float) -> LowSpace | None:
        """The lowest filesystem below the floor (while low: below the resume level), else
        None; looks again only ``interval_s`` after the last look (``now``: monotonic s)."""
        if not self.min_free_bytes or now < self._next_at:
            return self.low
        self._next_at = now + self._interval_s
        level = self.min_free_bytes if self.low is None else self._resume_at
        low: LowSpace | None = None
        for path in self.paths:
            free = free_bytes(path)
            if free < level and (low is None or free < low.free_bytes):
                low = LowSpace(path, free)
        self.low = low
        return low


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged process may still write on ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def human_bytes(n: int) -> str:
    """``1.5 GiB``, ``812.0 MiB``, ``640 B``: binary units, one decimal."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
