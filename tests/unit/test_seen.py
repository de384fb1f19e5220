"""Tests of the seen-set (frontier/seen.py) on a real LMDB environment in tmp_path."""

from __future__ import annotations

import errno
import hashlib
import os
import pickle
import struct
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier.seen import (
    LOG_CHUNK,
    DigestBloomFilter,
    SeenSet,
    expected_false_positives,
)
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
        seen.flush(txn)
        return answers


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
    assert {
        "capacity",
        "error_rate",
        "count",
        "estimated_false_positives",
        "rescued_false_positives",
        "bloom_bytes",
    } <= stats.keys()
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


def _exact(env: lmdb.Environment, seen: SeenSet) -> int:
    with env.begin() as txn:
        return seen.exact_count(txn)


def _recent(env: lmdb.Environment, seen: SeenSet) -> int:
    with env.begin() as txn:
        return seen.recent_count(txn)


def _restored(env: lmdb.Environment, path: Path, digests: list[bytes]) -> SeenSet:
    """A restart: a fresh set loads the snapshot; every digest is then known without a miss."""
    restored = SeenSet(env, 1000, 1e-6, recent_size=0)
    assert restored.load_snapshot(path, _exact(env, restored))
    assert restored.count == len(digests)
    assert all(d in restored.bloom for d in digests)
    assert _add_all(env, restored, digests) == [False] * len(digests)
    assert restored.bloom_misses == 0
    return restored


def test_adds_are_logged_until_a_snapshot(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(i) for i in range(10)] + [_digest(3)])
    assert _recent(env, seen) == 10  # new digests only
    seen.save_snapshot(tmp_path / "seen.bloom")
    assert _recent(env, seen) == 0
    _add_all(env, seen, [_digest(10), _digest(1)])
    assert _recent(env, seen) == 1


def test_stale_snapshot_plus_recent_loads(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    digests = [_digest(i) for i in range(10)]
    _add_all(env, seen, digests)
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    later = [_digest(i) for i in range(10, 15)]
    _add_all(env, seen, later)  # committed after the snapshot, then a kill -9
    assert _exact(env, seen) == 15
    assert _recent(env, seen) == 5
    _restored(env, path, digests + later)


def test_kill_after_snapshot_before_clear(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    first = [_digest(i) for i in range(10)]
    _add_all(env, seen, first)
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    second = [_digest(i) for i in range(10, 20)]
    _add_all(env, seen, second)

    def killed(_txn: object, _upto: int) -> None:
        raise KeyboardInterrupt("killed after the rename, before seen_recent is cleared")

    seen._forget_logged = killed  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        seen.save_snapshot(path)  # the new file is in place; its transaction aborted
    assert _recent(env, seen) == 10  # not cleared: entries the new file already holds
    # restart: the new snapshot plus the log (whose entries are all before its position)
    restored = _restored(env, path, first + second)
    third = [_digest(i) for i in range(20, 25)]
    assert _add_all(env, restored, third) == [True] * 5
    # a second kill, before any checkpoint: still loads (old entries ignored in the count)
    _restored(env, path, first + second + third)
    # and the next snapshot clears the log and loads on its own
    restored.save_snapshot(path)
    assert _recent(env, restored) == 0
    _restored(env, path, first + second + third)


def test_kill_before_rename_keeps_the_old_snapshot(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    first = [_digest(i) for i in range(10)]
    _add_all(env, seen, first)
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    second = [_digest(i) for i in range(10, 20)]
    _add_all(env, seen, second)
    path.with_name("seen.bloom.tmp").write_bytes(b"half-written")  # killed while writing
    _restored(env, path, first + second)


def test_snapshot_in_the_callers_transaction(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    path = tmp_path / "seen.bloom"
    digests = [_digest(i) for i in range(12)]
    with env.begin(write=True) as txn:
        for d in digests[:6]:
            assert seen.add_new(txn, d)
        seen.save_snapshot(path, txn)  # no second writer: the batch's transaction is used
        for d in digests[6:]:
            assert seen.add_new(txn, d)
        seen.flush(txn)
    assert _recent(env, seen) == 6
    _restored(env, path, digests)


def test_snapshot_of_an_aborted_transaction_is_refused(
    env: lmdb.Environment, tmp_path: Path
) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(i) for i in range(5)])
    path = tmp_path / "seen.bloom"
    txn = env.begin(write=True)
    seen.add_new(txn, _digest(99))
    seen.save_snapshot(path, txn)  # counts the uncommitted digest
    txn.abort()
    fresh = SeenSet(env, 1000, 1e-6)
    assert not fresh.load_snapshot(path, _exact(env, fresh))
    with env.begin() as read:
        assert fresh.rebuild(read) == 5


def test_snapshot_missing_means_rebuild(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    digests = [_digest(i) for i in range(30)]
    _add_all(env, seen, digests)
    fresh = SeenSet(env, 1000, 1e-6, recent_size=0)
    assert not fresh.load_snapshot(tmp_path / "seen.bloom", _exact(env, fresh))
    with env.begin() as txn:
        assert fresh.rebuild(txn) == 30
    assert _add_all(env, fresh, digests) == [False] * 30
    assert fresh.bloom_misses == 0


def test_mismatched_counts_mean_rebuild(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(i) for i in range(10)])
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    older = path.read_bytes()
    _add_all(env, seen, [_digest(i) for i in range(10, 20)])
    seen.save_snapshot(path)  # clears the log of digests 10..19
    _add_all(env, seen, [_digest(i) for i in range(20, 25)])
    exact = _exact(env, seen)
    assert exact == 25
    # an older snapshot: the log no longer covers what came after it
    path.write_bytes(older)
    assert not SeenSet(env, 1000, 1e-6).load_snapshot(path, exact)
    # the current snapshot, but LMDB disagrees with it (lost transactions, other counts)
    seen.save_snapshot(path)
    assert SeenSet(env, 1000, 1e-6).load_snapshot(path, exact)
    assert not SeenSet(env, 1000, 1e-6).load_snapshot(path, exact + 1)
    assert not SeenSet(env, 1000, 1e-6).load_snapshot(path, exact - 1)
    fresh = SeenSet(env, 1000, 1e-6)
    with env.begin() as txn:
        assert fresh.rebuild(txn) == 25


def test_restart_never_reuses_a_log_position(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(i) for i in range(10)])
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)  # the log is now empty
    restarted = SeenSet(env, 1000, 1e-6)
    assert restarted.load_snapshot(path, 10)
    _add_all(env, restarted, [_digest(i) for i in range(10, 13)])
    _restored(env, path, [_digest(i) for i in range(13)])


def test_pybloom_hashing_snapshot_refused(env: lmdb.Environment, tmp_path: Path) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(1)])
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    data = path.read_bytes()
    path.write_bytes(b"FCSEEN01" + data[8:])
    assert not SeenSet(env, 1000, 1e-6).load_snapshot(path, 1)


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


# ----------------------------------------------------------------------------- the Bloom filter


def test_digest_bloom_sets_one_bit_per_slice() -> None:
    bloom = DigestBloomFilter(10_000, 1e-5)
    m, k = bloom.bits_per_slice, bloom.num_slices
    for i in range(200):
        indexes = bloom.bit_indexes(_digest(i))
        assert len(indexes) == k
        assert [index // m for index in indexes] == list(range(k))
    assert bloom.bit_indexes(_digest(1)) == bloom.bit_indexes(_digest(1))  # deterministic


def test_digest_bloom_keeps_pybloom_behaviour(tmp_path: Path) -> None:
    bloom = DigestBloomFilter(1000, 1e-4)
    digests = [_digest(i) for i in range(100)]
    for d in digests:
        assert not bloom.add(d)
    assert bloom.add(digests[0])  # already there
    assert all(d in bloom for d in digests)
    assert "a string key" not in bloom
    bloom.add("a string key")
    assert "a string key" in bloom
    path = tmp_path / "bloom"
    with path.open("wb") as f:
        bloom.tofile(f)
    with path.open("rb") as f:
        loaded = DigestBloomFilter.fromfile(f)
    assert isinstance(loaded, DigestBloomFilter)
    assert loaded.bitarray[: bloom.num_bits] == bloom.bitarray  # fromfile pads to bytes
    assert loaded.count == bloom.count
    assert all(d in loaded for d in digests)
    for other in (loaded.copy(), pickle.loads(pickle.dumps(bloom))):
        assert isinstance(other, DigestBloomFilter)
        assert all(d in other for d in digests)
        assert other.bit_indexes(digests[3]) == bloom.bit_indexes(digests[3])


def test_false_positive_rate_at_capacity_matches_the_sizing() -> None:
    bloom = DigestBloomFilter(5000, 0.01)
    for i in range(5000):
        bloom.add(_digest(i))
    queries = 100_000
    false_positives = sum(_digest(i) in bloom for i in range(10_000, 10_000 + queries))
    assert 0.007 < false_positives / queries < 0.013  # sized for 0.01 at capacity


def test_seen_layout_and_log_chunks(env: lmdb.Environment) -> None:
    """b"seen" holds (4-byte host hash, 12-byte rest) pairs; seen_recent chunks of digests."""
    seen = SeenSet(env, 1000, 1e-6)
    digests = [_digest(i) for i in range(LOG_CHUNK + 5)]
    _add_all(env, seen, digests)
    with env.begin() as txn:
        db = env.open_db(b"seen", txn=txn, dupsort=True, dupfixed=True)
        pairs = list(txn.cursor(db=db).iternext())
        assert sorted(k + v for k, v in pairs) == sorted(digests)
        assert {len(k) for k, _ in pairs} == {4} and {len(v) for _, v in pairs} == {12}
        assert seen.exact_count(txn) == len(digests)
        log_db = env.open_db(b"seen_recent", txn=txn)
        assert txn.stat(log_db)["entries"] == 2  # one put per LOG_CHUNK new digests
        assert seen.recent_count(txn) == len(digests)
        assert all(seen.contains(txn, d) for d in digests)
        assert not seen.contains(txn, _digest(10_000))


def test_unflushed_log_means_rebuild_never_a_wrong_load(
    env: lmdb.Environment, tmp_path: Path
) -> None:
    seen = SeenSet(env, 1000, 1e-6)
    _add_all(env, seen, [_digest(i) for i in range(5)])
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    with env.begin(write=True) as txn:  # committed without flush: the log lacks _digest(5)
        assert seen.add_new(txn, _digest(5))
    seen.aborted()
    assert not SeenSet(env, 1000, 1e-6).load_snapshot(path, _exact(env, seen))


def test_snapshot_loads_into_the_filter_in_place(env: lmdb.Environment, tmp_path: Path) -> None:
    """A restart holds one filter: the snapshot's bits go into the set's own buffer, with no
    second copy of the filter allocated while it loads (the reopen's memory peak)."""
    seen = SeenSet(env, 200_000, 1e-7)
    digests = [_digest(i) for i in range(2_000)]
    _add_all(env, seen, digests)
    path = tmp_path / "seen.bloom"
    seen.save_snapshot(path)
    _add_all(env, seen, [_digest(-1)])  # one digest logged after the snapshot
    restored = SeenSet(env, 200_000, 1e-7)
    size = int(restored.stats()["bloom_bytes"])
    tracemalloc.start()
    try:
        assert restored.load_snapshot(path, _exact(env, restored))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size // 4, f"{peak} bytes allocated to load a {size}-byte filter"
    assert restored.bloom.bitarray == seen.bloom.bitarray
    with env.begin(write=True) as txn:
        assert not any(restored.add_new(txn, d) for d in [*digests, _digest(-1)])
    assert restored.stats()["bloom_misses"] == 0


def test_rebuild_clears_the_filter_in_place(env: lmdb.Environment) -> None:
    """A rebuild refills the set's own filter (cleared first), with no second one allocated."""
    seen = SeenSet(env, 200_000, 1e-7, recent_size=0)
    _add_all(env, seen, [_digest(i) for i in range(100)])
    seen.bloom.bitarray.setall(1)  # garbage, e.g. a snapshot that failed half way
    size = int(seen.stats()["bloom_bytes"])
    tracemalloc.start()
    try:
        with env.begin() as txn:
            assert seen.rebuild(txn) == 100
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size // 4, f"{peak} bytes allocated to rebuild a {size}-byte filter"
    assert seen.bloom.bitarray.count() <= 100 * seen.bloom.num_slices
    assert _digest(100) not in seen.bloom


def test_snapshot_is_saved_without_a_copy(env: lmdb.Environment, tmp_path: Path) -> None:
    """The filter is written from its own buffer in chunks: no copy of it is made to save."""
    seen = SeenSet(env, 200_000, 1e-7)
    _add_all(env, seen, [_digest(i) for i in range(100)])
    size = int(seen.stats()["bloom_bytes"])
    tracemalloc.start()
    try:
        seen.save_snapshot(tmp_path / "seen.bloom")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size // 4, f"{peak} bytes allocated to save a {size}-byte filter"
    assert (tmp_path / "seen.bloom").stat().st_size > size


def test_a_snapshot_without_room_takes_none_of_it(tmp_path: Path) -> None:
    """A snapshot larger than the free space is refused (ENOSPC) before any of it is written:
    written until the disk was full, it took every free byte for a moment, and a WARC record
    written by the crawl's writer process in that moment failed the crawl (seen at -n 6 in
    tests/e2e/test_disk_snapshot.py: "WARC writing failed: OSError: [Errno 28]")."""
    from tests.e2e.test_disk_full import MIB, Tmpfs

    fs = Tmpfs(tmp_path / "fs", 2 * MIB)
    env = open_env(tmp_path / "lmdb", 1 << 26)
    try:
        seen = SeenSet(env, 2_000_000, 1e-7)  # about 8.4 MB of filter on a 2 MiB file system
        assert seen.stats()["bloom_bytes"] > fs.free()
        before = os.stat(fs.path).st_mtime_ns, fs.free()
        time.sleep(0.01)  # a file created and removed now would move the directory's mtime
        with pytest.raises(OSError) as caught:
            seen.save_snapshot(fs.path / "seen.bloom")
        assert caught.value.errno == errno.ENOSPC
        assert (os.stat(fs.path).st_mtime_ns, fs.free()) == before  # nothing created, ever
        assert list(fs.path.iterdir()) == []
    finally:
        env.close()
        fs.unmount()
