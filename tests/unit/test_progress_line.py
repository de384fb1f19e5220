"""The progress line and panel (runner.py) say each thing once (issue 17: "PAUSED: low disk
space paused: paused: low disk space")."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from frontier_crawl.control.status import Signals, classify
from frontier_crawl.runner import progress_panel, progress_printer


def _progress(sig: Signals, paused_for_space: bool) -> dict[str, Any]:
    b = classify(sig)
    return {
        "elapsed_s": 12.0, "pages": 340, "pages_per_s": 28.3, "queued": 1200, "in_flight": 0,
        "hosts": 3, "paused_for_space": paused_for_space, "bottleneck": f"{b.name}: {b.detail}",
    }  # fmt: skip


def _shown(p: dict[str, Any], panel: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=240, color_system=None)
    if panel:
        console.print(progress_panel(p))
    else:
        progress_printer(console)(p)
    return out.getvalue()


def test_low_disk_space_is_said_once() -> None:
    p = _progress(Signals(low_space=True, hosts_total=3, queued=1200), paused_for_space=True)
    for panel in (False, True):
        text = _shown(p, panel)
        assert text.count("low disk space") == 1, text
        assert "paused: paused" not in text, text


def test_low_disk_space_is_said_when_the_bottleneck_is_another() -> None:
    """Stopping (draining) while short of space: the line still says the space is low."""
    sig = Signals(low_space=True, stop_requested=True, in_flight=2, hosts_total=3)
    for panel in (False, True):
        text = _shown(_progress(sig, paused_for_space=True), panel)
        assert "draining" in text and text.count("low disk space") == 1, text
