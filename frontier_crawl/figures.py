"""The crawl's headline figures, computed in one place, and the one way each is written for a
person: every screen (the terminal panel, ``ctl status``, ``/metrics``, the dashboard,
``report.json`` and ``report.html``) reads them from here.

The figures, over every run of a crawl (a resumed crawl goes on counting):

* ``pages``: responses with new content (outcome ``fetched``: a first visit, or a revisit that
  found the page changed);
* ``revisits``: visits of a URL fetched before (a continuous crawl's, whatever their result:
  changed, unchanged, not modified, gone, failed); 0 without ``[recrawl]``;
* ``elapsed_s``: the seconds the crawl ran, over every run (time between runs not counted);
* ``pages_per_s``: ``pages / elapsed_s``, the whole crawl's mean (the reports'); the status's
  ``pages_per_s`` is the rate now, over its last ten seconds (``control/status.py``);
* ``this_run``: the same figures for the current (or last) run alone, apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def per_second(count: float, seconds: float) -> float:
    """``count / seconds``, 0 for no time (a figure with nothing to divide by is 0)."""
    return count / seconds if seconds > 0 else 0.0


def rate_text(per_s: object) -> str:
    """A rate per second for a person: 3 significant figures below 100, whole above."""
    if not isinstance(per_s, int | float) or isinstance(per_s, bool):
        return "-"
    v = float(per_s)
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def duration_text(seconds: object) -> str:
    """A duration for a person: ``4.2 s``, ``37 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return "-"
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{s:.1f} s"
    if s < 120:
        return f"{s:.0f} s"
    whole = int(s)
    h, rem = divmod(whole, 3600)
    return f"{h} h {rem // 60:02d} min" if h else f"{rem // 60} min {rem % 60:02d} s"


def count_text(n: object) -> str:
    """A count for a person: ``12,345``."""
    if isinstance(n, bool) or not isinstance(n, int | float):
        return "-"
    return f"{int(n):,}"


@dataclass(slots=True, frozen=True)
class Figures:
    """The headline figures of a crawl at one instant (module docstring)."""

    pages: int
    revisits: int
    elapsed_s: float
    run_pages: int
    run_revisits: int
    run_elapsed_s: float

    @property
    def pages_per_s(self) -> float:
        return per_second(self.pages, self.elapsed_s)

    def this_run(self) -> dict[str, Any]:
        """The current run's figures (the status's and the report's ``this_run``)."""
        return {
            "pages": self.run_pages,
            "revisits": self.run_revisits,
            "elapsed_s": round(self.run_elapsed_s, 3),
            "pages_per_s": round(per_second(self.run_pages, self.run_elapsed_s), 3),
        }

    def as_dict(self) -> dict[str, Any]:
        """The figures as the report writes them."""
        return {
            "fetched": self.pages,
            "revisits": self.revisits,
            "elapsed_s": round(self.elapsed_s, 3),
            "pages_per_s": round(self.pages_per_s, 3),
            "this_run": self.this_run(),
        }


def merge_this_run(parts: list[Any]) -> dict[str, Any]:
    """Several processes' ``this_run`` (worker processes side by side): counts added, the
    longest time, the rate recomputed."""
    rows = [p for p in parts if isinstance(p, dict)]
    pages = sum(int(p.get("pages", 0)) for p in rows)
    revisits = sum(int(p.get("revisits", 0)) for p in rows)
    elapsed = max((float(p.get("elapsed_s", 0.0)) for p in rows), default=0.0)
    return {"pages": pages, "revisits": revisits, "elapsed_s": round(elapsed, 3),
            "pages_per_s": round(per_second(pages, elapsed), 3)}  # fmt: skip


def this_run_text(run: object) -> str:
    """``this run: 120 pages in 4 min 05 s (0.49/s)`` (revisits when there were some)."""
    if not isinstance(run, dict):
        return ""
    revisits = run.get("revisits") or 0
    return (f"this run: {count_text(run.get('pages', 0))} pages"
            + (f", {count_text(revisits)} revisits" if revisits else "")
            + f" in {duration_text(run.get('elapsed_s', 0.0))} "
            f"({rate_text(run.get('pages_per_s', 0.0))}/s)")  # fmt: skip
