"""The engine: the only package that knows every subsystem, and the one event loop that drives
them, as a few parts each with one job (DESIGN.md, "The shape of the engine"):

* ``core.py``: the loop (the tick, handling a result, disposing of a page), :class:`Engine`.
* ``build.py``: :func:`open_parts`, every part built from the settings by its own factory.
* ``commit.py``: the group commit over the output protocol (WARC, crawl log, feeds alike).
* ``observe.py``: status, metrics and the progress line, read-only, from the loop's timings.
* ``steer.py``: control commands, reloads, pause and stop signals, drained once per tick.
* ``exchange.py``: a worker's outbox and inbox (the ``PeersLike`` seam), with the commit.
* ``space.py``: the space guard (pause or stop below ``output.min_free_bytes``).
* ``state.py``: what the loop is doing (paused, stopping...), one writer per field.
* ``seams.py``: what the loop needs of its collaborators (the fetcher, the peers, the command
  source), as one-method ``Protocol``s, and the crawl's file :class:`Layout`.
"""

from frontier_crawl.engine.build import STATS_BLOB, Parts, open_parts, set_aside_state
from frontier_crawl.engine.core import Engine
from frontier_crawl.engine.seams import (
    CommandSource,
    FetcherLike,
    Layout,
    PeersLike,
    PendingLike,
)

__all__ = [
    "STATS_BLOB",
    "CommandSource",
    "Engine",
    "FetcherLike",
    "Layout",
    "Parts",
    "PeersLike",
    "PendingLike",
    "open_parts",
    "set_aside_state",
]
