"""Tests of the seen-set (frontier/seen.py) on a real LMDB environment in tmp_path."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier.seen import SeenSet, expected_false_positives
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
        return [seen.add_new(txn, d) for d in digests]


def test_new_then_seen(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    a, b = url_digest("http://a.demo/"), url_digest("http://a.demo/x")
    assert _add_all(env, seen, [a, b, a, b, a]) == [True, True, False, False, False]
    assert seen.count == 2
    with env.begin() as txn:
        assert seen.contains(txn, a)
        assert seen.contains(txn, b)
        assert not seen.contains(txn, url_digest("http://a.demo/y"))
        assert seen.exact_count(txn) == 2


def test_answers_without_recent_cache(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 1000, 1e-6, recent_size=0)
    digests = [_digest(i) for i in range(50)]
    assert _add_all(env, seen, digests) == [True] * 50
    assert _add_all(env, seen, digests) == [False] * 50
    assert seen.recent_hits == 0
    assert seen.maybe_answers == 50  # repeats: Bloom "maybe", confirmed in LMDB
    assert seen.rescued_false_positives == 0


def test_recent_cache_answers_repeats(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 1000, 1e-6, recent_size=8)
    digests = [_digest(i) for i in range(3)]
    _add_all(env, seen, digests)
    assert _add_all(env, seen, digests * 3) == [False] * 9
    assert seen.recent_hits == 9
    assert seen.maybe_answers == 0
    # many other digests push the old ones out of both generations; answers stay exact
    _add_all(env, seen, [_digest(i) for i in range(100, 120)])
    hits = seen.recent_hits
    assert _add_all(env, seen, digests) == [False] * 3
    assert seen.recent_hits == hits


def test_recent_cache_is_not_trusted_after_an_aborted_transaction(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    digest = _digest(1)
    txn = env.begin(write=True)
    assert seen.add_new(txn, digest)
    txn.abort()
    # the digest is in the recent cache and the Bloom filter, but not in LMDB: still new
    assert _add_all(env, seen, [digest]) == [True]
    with env.begin() as txn:
        assert seen.contains(txn, digest)


def test_forced_false_positive_is_rescued(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    digest = _digest(7)
    seen.bloom.add(digest)  # its bits are set, but it was never stored
    assert digest in seen.bloom
    assert _add_all(env, seen, [digest]) == [True]
    assert seen.rescued_false_positives == 1
    assert seen.maybe_answers == 1
    assert seen.count == 1
    assert _add_all(env, seen, [digest]) == [False]
    assert seen.rescued_false_positives == 1


def test_saturated_filter_never_drops_a_url(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 10, 0.5, recent_size=0)
    digests = [_digest(i) for i in range(500)]
    assert _add_all(env, seen, digests) == [True] * 500  # past capacity: no IndexError
    assert seen.count == 500
    assert seen.rescued_false_positives > 400
    assert _add_all(env, seen, digests) == [False] * 500
    with env.begin() as txn:
        assert seen.exact_count(txn) == 500


def test_estimated_false_positives_matches_observed(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 1000, 0.01, recent_size=0)
    _add_all(env, seen, [_digest(i) for i in range(3000)])
    observed = seen.rescued_false_positives
    estimated = seen.estimated_false_positives()
    assert observed > 100
    assert abs(observed - estimated) < 5 * estimated**0.5  # Poisson-like spread


@pytest.mark.parametrize(
    ("inserts", "bits_per_slice", "slices"),
    [(100, 50, 3), (1000, 500, 7), (5000, 1000, 4), (20000, 1000, 2), (50, 10_000, 5)],
)
def test_expected_false_positives_formula(inserts: int, bits_per_slice: int, slices: int) -> None:
    m = bits_per_slice
    exact_sum = sum((1 - (1 - 1 / m) ** i) ** slices for i in range(inserts))
    estimate = expected_false_positives(inserts, bits_per_slice, slices)
    assert estimate == pytest.approx(exact_sum, rel=0.02, abs=1e-9)


def test_expected_false_positives_edges() -> None:
    assert expected_false_positives(0, 100, 3) == 0.0
    saturated = 10**9 - 100 * (1 + 1 / 2 + 1 / 3)
    assert expected_false_positives(10**9, 100, 3) == pytest.approx(saturated)


def test_stats(env: lmdb.Environment) -> None:
    seen = SeenSet(env, 10_000, 1e-7)
    _add_all(env, seen, [_digest(i) for i in range(10)])
    stats = seen.stats()
    assert {"capacity", "error_rate", "count", "estimated_false_positives",
            "rescued_false_positives", "bloom_bytes"} <= stats.keys()
    assert stats["capacity"] == 10_000
    assert stats["error_rate"] == 1e-7
    assert stats["count"] == 10
    assert 0 <= stats["estimated_false_positives"] < 1e-6
    assert stats["bloom_bytes"] == (seen.bloom.num_bits + 7) // 8


def test_count_survives_reopen(tmp_path: Path) -> None:
    env = open_env(tmp_path / "lmdb", 1 << 24)
    _add_all(env, SeenSet(env, 100, 0.01), [_digest(i) for i in range(5)])
    env.close()
    env = open_env(tmp_path / "lmdb", 1 << 24)
    assert SeenSet(env, 100, 0.01).count == 5
    env.close()


def test_rebuild(env: lmdb.Environment) -> None:
    digests = [_digest(i) for i in range(200)]
    _add_all(env, SeenSet(env, 1000, 1e-6), digests)
    fresh = SeenSet(env, 1000, 1e-6, recent_size=0)  # a restart without a snapshot
    with env.begin() as txn:
        assert fresh.rebuild(txn) == 200
    assert fresh.count == 200
    assert all(d in fresh.bloom for d in digests)
    assert _add_all(env, fresh, digests) == [False] * 200
    assert fresh.bloom_misses == 0


def test_empty_filter_over_full_lmdb_stays_exact(env: lmdb.Environment) -> None:
    digests = [_digest(i) for i in range(20)]
    _add_all(env, SeenSet(env, 1000, 1e-6), digests)
    unsynced = SeenSet(env, 1000, 1e-6, recent_size=0)  # neither rebuilt nor loaded
    assert _add_all(env, unsynced, digests) == [False] * 20
    assert unsynced.bloom_misses == 20


def test_snapshot_round_trip(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    digests = [_digest(i) for i in range(100)]
    _add_all(env, seen, digests)
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    assert not path.with_name("seen.bloom.tmp").exists()
    restored = SeenSet(env, 1000, 1e-6, recent_size=0)
    assert restored.load_snapshot(path, 100)
    assert restored.count == 100
    assert restored.bloom.bitarray == seen.bloom.bitarray
    assert _add_all(env, restored, digests) == [False] * 100
    assert restored.bloom_misses == 0
    assert _add_all(env, restored, [_digest(1000)]) == [True]


def test_stale_snapshot_rejected(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(i) for i in range(10)])
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    _add_all(env, seen, [_digest(10)])  # committed after the snapshot
    with env.begin() as txn:
        current = seen.exact_count(txn)
    assert current == 11
    assert not SeenSet(env, 1000, 1e-6).load_snapshot(path, current)


def test_snapshot_of_other_sizing_rejected(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(1)])
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    assert not SeenSet(env, 2000, 1e-6).load_snapshot(path, 1)
    assert not SeenSet(env, 1000, 1e-5).load_snapshot(path, 1)


@pytest.mark.parametrize("damage", ["missing", "empty", "truncated", "bad_magic"])
def test_damaged_snapshot_rejected(env: lmdb.Environment, tmp_path: Path, damage: str) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(1)])
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(data[: len(data) - 10])
    else:
        path.write_bytes(struct.pack("<8s", b"NOTSEEN!") + data[8:])
    fresh = SeenSet(env, 1000, 1e-6)
    assert not fresh.load_snapshot(path, 1)
    assert fresh.count == 1  # unchanged: the caller rebuilds
