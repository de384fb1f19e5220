"""The frontier: canonical URLs, seen-set, per-host queues in LMDB, politeness, robots.txt.

Never imports ``frontier_crawl.fetch``; the engine maps fetch results to frontier calls.
"""

from frontier_crawl.frontier.frontier import Frontier, HostState, Ticket

__all__ = ["Frontier", "HostState", "Ticket"]
