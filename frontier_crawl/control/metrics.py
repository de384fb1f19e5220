"""Prometheus metrics, rendered from status snapshots (``render_metrics``).

Filled in by the next commit; the signature is the seam the control server calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def render_metrics(snapshots: Sequence[Mapping[str, Any]]) -> bytes:
    """The Prometheus text exposition of the crawl from one metrics snapshot per worker
    process (``Engine.metrics()``; ``Coordinator.metrics()`` with worker processes): each has
    a ``"worker"`` key, the label value ("0" with one process)."""
    raise NotImplementedError
