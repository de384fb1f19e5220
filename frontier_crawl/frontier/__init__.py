"""The frontier: canonical URLs, seen-set, per-host queues in LMDB, politeness, robots.txt.

Never imports ``frontier_crawl.fetch``; the engine maps fetch results to frontier calls.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from frontier_crawl.frontier.completion import Completion, Failure, Settled
    from frontier_crawl.frontier.damage import DamagedState
    from frontier_crawl.frontier.frontier import Frontier
    from frontier_crawl.frontier.hosts import HostState
    from frontier_crawl.frontier.identity import StateMismatch
    from frontier_crawl.frontier.records import LastCapture, Ticket
    from frontier_crawl.frontier.recrawl import changed
    from frontier_crawl.frontier.status import HostSignals
    from frontier_crawl.frontier.store import StorageError

#: name -> its module, imported when the name is first asked for: a process that needs only a
#: part (the coordinator: the mailbox, URLs, scope) never imports the whole frontier
_LAZY = {
    "Completion": "completion", "Failure": "completion", "Settled": "completion",
    "DamagedState": "damage", "Frontier": "frontier", "HostState": "hosts", "Ticket": "records",
    "StateMismatch": "identity", "LastCapture": "records", "changed": "recrawl",
    "HostSignals": "status", "StorageError": "store",
}  # fmt: skip


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


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
