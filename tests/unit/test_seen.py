"""Tests of the seen-set (frontier/seen.py) on a real LMDB environment in tmp_path."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier.seen import RETIRED_LOG_DB, SeenSet
from frontier_crawl.frontier.store import open_env
from frontier_crawl.frontier.urls import url_digest


def _digest(i: int) -> bytes:
    return hashlib.blake2b(b"url-%d" % i, digest_size=16).digest()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[lmdb.Environment]:
    environment = open_env(tmp_path / "lmdb", 1 << 28)
    yield environment
    environment.close()


def _add_all(env: lmdb.Environment, seen: SeenSet, digests: list[bytes]) -> list[bool]:
    with env.begin(write=True) as txn:
        answers = [seen.add_new(txn, d) for d in digests]
    seen.committed()
    return answers


def _exact(env: lmdb.Environment, seen: SeenSet) -> int:
    with env.begin() as txn:
        return seen.exact_count(txn)


def test_new_then_seen(env: lmdb.Environment) -> None:
    seen = SeenSet(env)
    a, b = url_digest("http://a.demo/"), url_digest("http://a.demo/x")
    assert _add_all(env, seen, [a, b, a, b, a]) == [True, True, False, False, False]
    assert seen.count == 2
    with env.begin() as txn:
        assert seen.contains(txn, a)
        assert seen.contains(txn, b)
        assert not seen.contains(txn, url_digest("http://a.demo/y"))
        assert seen.exact_count(txn) == 2


def test_answers_without_recent_cache(env: lmdb.Environment) -> None:
    """Every answer from the exact put alone: new once, then seen, over many hosts."""
    seen = SeenSet(env, recent_size=0)
    digests = [url_digest(f"http://h{i % 37}.test/{i}") for i in range(3000)]
    assert _add_all(env, seen, digests) == [True] * 3000
    assert _add_all(env, seen, digests) == [False] * 3000
    assert seen.recent_hits == 0
    assert seen.count == _exact(env, seen) == 3000


def test_recent_cache_answers_repeats(env: lmdb.Environment) -> None:
    seen = SeenSet(env, recent_size=8)
    digests = [_digest(i) for i in range(3)]
    _add_all(env, seen, digests)
    assert _add_all(env, seen, digests * 3) == [False] * 9
    assert seen.recent_hits == 9
    # many other digests push the old ones out of both generations; answers stay exact
    _add_all(env, seen, [_digest(i) for i in range(100, 120)])
    hits = seen.recent_hits
    assert _add_all(env, seen, digests) == [False] * 3
    assert seen.recent_hits == hits


def test_recent_cache_is_not_trusted_after_an_aborted_transaction(env: lmdb.Environment) -> None:
    seen = SeenSet(env)
    digest = _digest(1)
    txn = env.begin(write=True)
    assert seen.add_new(txn, digest)
    txn.abort()
    seen.aborted()
    # the digest is in the recent cache, but not in LMDB: still new
    assert _add_all(env, seen, [digest]) == [True]
    with env.begin() as txn:
        assert seen.contains(txn, digest)


def test_an_aborted_transaction_takes_its_inserts_back_from_the_count(
    env: lmdb.Environment,
) -> None:
    seen = SeenSet(env)
    _add_all(env, seen, [_digest(i) for i in range(10)])
    txn = env.begin(write=True)
    answers = [seen.add_new(txn, _digest(i)) for i in range(5, 20)]
    assert answers == [False] * 5 + [True] * 10
    assert seen.count == 20  # the open transaction's inserts included
    txn.abort()
    seen.aborted()
    assert seen.count == _exact(env, seen) == 10
    assert _add_all(env, seen, [_digest(i) for i in range(5, 20)]) == [False] * 5 + [True] * 10
    assert seen.count == _exact(env, seen) == 20


def test_stats(env: lmdb.Environment) -> None:
    seen = SeenSet(env)
    _add_all(env, seen, [_digest(i) for i in range(10)])
    _add_all(env, seen, [_digest(0)])
    assert seen.stats() == {"count": 10, "recent_hits": 1}


def test_count_survives_reopen(tmp_path: Path) -> None:
    env = open_env(tmp_path / "lmdb", 1 << 24)
    _add_all(env, SeenSet(env), [_digest(i) for i in range(5)])
    env.close()
    env = open_env(tmp_path / "lmdb", 1 << 24)
    seen = SeenSet(env)
    assert seen.count == 5
    assert _add_all(env, seen, [_digest(i) for i in range(7)]) == [False] * 5 + [True] * 2
    env.close()


def test_seen_layout(env: lmdb.Environment) -> None:
    """b"seen" holds (4-byte host hash, 12-byte rest) pairs, and nothing else is written."""
    seen = SeenSet(env)
    digests = [_digest(i) for i in range(125)]
    _add_all(env, seen, digests)
    with env.begin() as txn:
        db = env.open_db(b"seen", txn=txn, dupsort=True, dupfixed=True)
        pairs = list(txn.cursor(db=db).iternext())
        assert sorted(k + v for k, v in pairs) == sorted(digests)
        assert {len(k) for k, _ in pairs} == {4} and {len(v) for _, v in pairs} == {12}
        assert seen.exact_count(txn) == len(digests)
        assert all(seen.contains(txn, d) for d in digests)
        assert not seen.contains(txn, _digest(10_000))
        names = [bytes(k) for k, _ in txn.cursor()]  # the main database: the named ones
    assert names == [b"seen"]


def test_an_older_versions_seen_recent_is_dropped_once(tmp_path: Path) -> None:
    """A state written by a version with a Bloom filter: its digest log (``seen_recent``,
    u64 seq -> concatenated digests) is dropped at the first open; the set stays exact."""
    env = open_env(tmp_path / "lmdb", 1 << 24)
    digests = [_digest(i) for i in range(50)]
    with env.begin(write=True) as txn:
        db = env.open_db(b"seen", txn=txn, dupsort=True, dupfixed=True)
        log_db = env.open_db(RETIRED_LOG_DB, txn=txn)
        for d in digests:
            txn.put(d[:4], d[4:], db=db, dupdata=False)
        txn.put((0).to_bytes(8, "big"), b"".join(digests[:30]), db=log_db)
        txn.put((1).to_bytes(8, "big"), b"".join(digests[30:]), db=log_db)
    env.close()
    env = open_env(tmp_path / "lmdb", 1 << 24)
    seen = SeenSet(env)
    with env.begin() as txn:
        assert txn.get(RETIRED_LOG_DB) is None
    assert seen.count == 50
    more = [_digest(i) for i in range(40, 60)]
    assert _add_all(env, seen, more) == [False] * 10 + [True] * 10
    env.close()
    env = open_env(tmp_path / "lmdb", 1 << 24)
    assert SeenSet(env).count == 60  # the second open finds nothing to drop
    env.close()


_KILLED_CHILD = """
import os, signal, sys, hashlib
from pathlib import Path
from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import open_env

def digest(i):
    return hashlib.blake2b(b"url-%d" % i, digest_size=16).digest()

env = open_env(Path(sys.argv[1]), 1 << 24)
seen = SeenSet(env)
with env.begin(write=True) as txn:
    assert all(seen.add_new(txn, digest(i)) for i in range(100))
txn = env.begin(write=True)
assert [seen.add_new(txn, digest(i)) for i in range(50, 150)] == [False] * 50 + [True] * 50
os.kill(os.getpid(), signal.SIGKILL)  # in the middle of the second transaction
"""


def test_kill_in_an_open_transaction_keeps_the_committed_set_exact(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_KILLED_CHILD), str(path)],
        capture_output=True, text=True, timeout=60, env={**os.environ},
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    env = open_env(path, 1 << 24)
    seen = SeenSet(env)
    assert seen.count == 100
    answers = _add_all(env, seen, [_digest(i) for i in range(150)])
    assert answers == [False] * 100 + [True] * 50  # the killed transaction's: new again
    assert seen.count == _exact(env, seen) == 150
    env.close()
