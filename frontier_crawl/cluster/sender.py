"""The sending side, in each worker process: a link batch for a partition on another node.

:meth:`RemoteSender.send` adds the batch to the owner partition's stream and counts it, in one
``MULTI``/``EXEC`` (both or neither), and returns True only once Redis has answered (False at
once while Redis is full: the batch stays in the outbox and is sent again later): the engine
deletes the batch from its durable LMDB outbox after that (``engine/exchange.py``), so a kill at
any instant leaves the batch in the outbox or in the stream, or both (then it is sent twice and
admitted once: the entry carries its batch id, a hash of its bytes, which the owner remembers).
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING

from frontier_crawl.cluster.client import Keys, Redis

if TYPE_CHECKING:  # imported where used (client.py says why)
    import redis


def batch_id(batch: bytes) -> bytes:
    """The batch's id: the same bytes always get the same id, so a resent batch is known."""
    return hashlib.blake2b(batch, digest_size=16).digest()


class RemoteSender:
    """Adds batches to partition streams (see the module docstring)."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self.sent = 0  #: batches added (this run; the cluster-wide count is in Redis)

    def send(self, dest: int, batch: bytes) -> bool:
        """True once Redis has the batch; False at once if Redis is full (the engine keeps
        it in its outbox and tries again: the worker goes on crawling its own hosts), until
        it has been full for ``cluster.unreachable_timeout_s`` (``ClusterFull``)."""
        stream, counts = self._keys.stream(dest), self._keys.counts
        fields: dict[bytes, bytes] = {b"i": batch_id(batch), b"b": batch}

        def add(client: redis.Redis) -> bool:
            with client.pipeline(transaction=True) as pipe:
                pipe.xadd(stream, fields)  # type: ignore[arg-type]
                pipe.hincrby(counts, "sent", 1)
                pipe.execute()
            return True

        if not self._redis.call(f"adding a batch for partition {dest}", add, when_full=False):
            return False
        self.sent += 1
        return True

    def held_up(self, batches: int) -> str:
        """The status's sentence while Redis refuses batches for lack of memory, else ""."""
        lasted = self._redis.full_for(time.monotonic())
        if lasted is None:
            return ""
        left = max(0.0, self._redis.unreachable_timeout_s - lasted)
        waiting = f"{batches} batch{'es' if batches != 1 else ''}" + (
            " or more" if batches >= 256 else ""
        )
        return (
            f"Redis is out of memory (maxmemory) for {lasted:.0f} s, {waiting} for other "
            f"nodes waiting, giving up in {left:.0f} s"
        )

    def close(self) -> None:
        self._redis.close()
