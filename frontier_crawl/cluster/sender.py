"""The sending side, in each worker process: a link batch for a partition on another node.

:meth:`RemoteSender.send` adds the batch to the owner partition's stream and counts it, in one
``MULTI``/``EXEC`` (both or neither), and returns only once Redis has answered: the engine
deletes the batch from its durable LMDB outbox after that (``Engine._deliver``), so a kill at
any instant leaves the batch in the outbox or in the stream, or both (then it is sent twice and
admitted once: the entry carries its batch id, a hash of its bytes, which the owner remembers).
"""

from __future__ import annotations

import hashlib

import redis

from frontier_crawl.cluster.client import Keys, Redis


def batch_id(batch: bytes) -> bytes:
    """The batch's id: the same bytes always get the same id, so a resent batch is known."""
    return hashlib.blake2b(batch, digest_size=16).digest()


class RemoteSender:
    """Adds batches to partition streams (see the module docstring)."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self.sent = 0  #: batches added (this run; the cluster-wide count is in Redis)

    def send(self, dest: int, batch: bytes) -> None:
        stream, counts = self._keys.stream(dest), self._keys.counts
        fields: dict[bytes, bytes] = {b"i": batch_id(batch), b"b": batch}

        def add(client: redis.Redis) -> None:
            with client.pipeline(transaction=True) as pipe:
                pipe.xadd(stream, fields)  # type: ignore[arg-type]
                pipe.hincrby(counts, "sent", 1)
                pipe.execute()

        self._redis.call(f"adding a batch for partition {dest}", add)
        self.sent += 1

    def close(self) -> None:
        self._redis.close()
