"""Watching and steering a running crawl: status, metrics, the control API, the dashboard.

This subsystem reads snapshots the engine's loop publishes (plain dicts and frozen records) and
posts commands into a queue that the loop drains each tick; it never touches frontier state and
holds no locks around it. It imports only ``config`` and third-party libraries
(prometheus-client, rich), never frontier/, fetch/, parse/, output/, spider/ or cluster/.

* ``status.py``: the bottleneck, named, from measured signals (a pure function), and the status
  JSON's shape.
* ``metrics.py``: the Prometheus text rendered from status snapshots (one label: ``worker``;
  a cluster node's view of every node: label ``node``).
* ``commands.py``: operator commands, validated, and the queue the loop drains each tick (with
  its wakeup fd).
* ``server.py``: the HTTP listener (h11 parsing; a listener thread and at most 32 connection
  threads), its token and address files, the auth, Host and framing rules.
"""

from frontier_crawl.control.status import (
    BOTTLENECKS,
    Bottleneck,
    HostHold,
    Signals,
    classify,
)

__all__ = ["BOTTLENECKS", "Bottleneck", "HostHold", "Signals", "classify"]
