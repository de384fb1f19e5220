"""The frontier: canonical URLs, seen-set, per-host queues in LMDB, politeness, robots.txt.

Never imports ``frontier_crawl.fetch``; the engine maps fetch results to frontier calls.
"""

from frontier_crawl.frontier.completion import Completion, Failure, Settled
from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.frontier import Frontier
from frontier_crawl.frontier.hosts import HostState, Ticket
from frontier_crawl.frontier.identity import StateMismatch
from frontier_crawl.frontier.recrawl import LastCapture, changed
from frontier_crawl.frontier.status import HostSignals
from frontier_crawl.frontier.store import StorageError

__all__ = [
    "Completion",
    "DamagedState",
    "Failure",
    "Frontier",
    "HostSignals",
    "HostState",
    "LastCapture",
    "Settled",
    "StateMismatch",
    "StorageError",
    "Ticket",
    "changed",
]
