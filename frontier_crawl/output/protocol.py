"""The one protocol every crawl output follows (WARC files, the crawl log, the feeds).

An output is something a commit depends on: what a page wrote to it must reach the OS (or the
disk, with ``output.durability = "power-loss"``) before the LMDB commit that marks the page
done, and at start-up it is cut back to what the last commit knew of it. Each output says:

* ``name``: a stable key for its commit point in the frontier's blobs (``output:<name>``).
* ``prepare_commit(upto)``: make its appends durable before a commit. ``upto`` is the append
  sequence number the commit needs (``None``: everything). Outputs written by the crawl loop
  itself (crawl log, feeds) always hand over everything; the WARC writer, whose records a child
  process writes at its own pace, waits only when the commit needs a record it has not yet
  reported durable.
* ``durable()``: how far it is durable, without waiting (WARC: writes, feeds: bytes). The
  engine marks a page done (and appends its items to the feeds) only once the page's records
  are within it.
* ``commit_point()``: what the commit records about it (a feed's byte offset), or ``None`` for
  an output that is not cut back to a committed point (the crawl log keeps a duplicate line
  after a kill, the WARC writer a duplicate record: both harmless, both documented).
* ``discard()``: after a failed write, close without handing over what is buffered.
* ``close()``: hand over everything and close (idempotent).

Start-up repair is the outputs' factory (``open.py``: ``open_outputs``, each output built from
its own settings, ``output.durability`` included): it recovers the files a killed
run left (``recover.py``) and cuts each output back to its committed point before opening it,
and never raises for damage (what it cannot use is set aside with a warning).
"""

from __future__ import annotations

from typing import Protocol


class Output(Protocol):
    """A crawl output on the write-flush-then-commit protocol (module docstring)."""

    @property
    def name(self) -> str: ...
    def prepare_commit(self, upto: int | None = None) -> None: ...
    def durable(self) -> int: ...
    def commit_point(self) -> bytes | None: ...
    def discard(self) -> None: ...
    def close(self) -> None: ...


def blob_name(output: str) -> str:
    """The frontier blob under which an output's commit point is stored."""
    return f"output:{output}"
