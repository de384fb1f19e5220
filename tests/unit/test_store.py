"""Tests of the LMDB queue store and its block codec (frontier/store.py), real LMDB in tmp_path."""

from __future__ import annotations

import contextlib
import functools
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from random import Random
from typing import TypeVar

import lmdb
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_crawl.frontier.store import (
    BLOCK_MAX,
    DEFAULT_RANK,
    PRIORITY_MAX,
    SEQ_BLOCK,
    QueueEntry,
    QueueStore,
    decode_block,
    decode_key,
    encode_block,
    encode_key,
    key_before,
    key_rank,
    open_env,
    rank_of,
    release_mapped_pages,
)

HYPOTHESIS = settings(max_examples=300, database=None, deadline=None)
MAP_SIZE = 1 << 26
A = "http://a.demo"
A81 = "http://a.demo:81"
B = "https://b.demo"
T = TypeVar("T")


@pytest.fixture
def env(tmp_path: Path) -> Iterator[lmdb.Environment]:
    environment = open_env(tmp_path / "lmdb", MAP_SIZE)
    yield environment
    environment.close()


def _entry(url: str) -> QueueEntry:
    return QueueEntry(url, 1)


def _urls(rows: list[tuple[bytes, QueueEntry]]) -> list[str]:
    return [entry.url for _, entry in rows]


class Q:
    """A store and the host ids it gave out, driven as the frontier drives it."""

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self.store = QueueStore(env)
        self.ids: dict[str, int] = {}

    def commit(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``fn`` in a write transaction, flushing before the commit (as Frontier does)."""
        try:
            with self.env.begin(write=True) as txn:
                result = fn(txn)
                self.store.flush(txn)
        except BaseException:
            self.store.aborted()
            raise
        self.store.committed()
        return result

    def hid(self, txn: lmdb.Transaction, host: str) -> int:
        if host not in self.ids:
            self.ids[host] = self.store.host_id(txn, host)
        return self.ids[host]

    def add(
        self, txn: lmdb.Transaction, host: str, prio: int, url: str, held: bool = False
    ) -> bytes:
        return self.store.add(txn, self.hid(txn, host), host, prio, _entry(url), held)

    def put_all(self, rows: list[tuple[str, int, str]], held: bool = False) -> list[bytes]:
        return self.commit(lambda txn: [self.add(txn, h, p, u, held) for h, p, u in rows])

    def read(
        self, host: str, after: bytes | None = None, limit: int = 100, *, hold: bool = False
    ) -> list[tuple[bytes, QueueEntry]]:
        """``read_after``; unless ``hold``, the entries read are released at once (a look
        that leaves them in LMDB, to be read again; held entries are skipped)."""
        with self.env.begin() as txn:
            rows = self.store.read_after(txn, self.ids[host], host, after, limit)
        if not hold:
            for key, _ in rows:
                assert self.store.release(key)
        return rows

    def counts(self) -> dict[str, int]:
        with self.env.begin() as txn:
            counts = self.store.host_counts(txn)
            return {str(self.store.origin_of(txn, hid)): n for hid, n in counts.items() if n}


# ----------------------------------------------------------------------------- environment


def test_open_env_settings(tmp_path: Path) -> None:
    env = open_env(tmp_path / "lmdb", MAP_SIZE)
    try:
        flags = env.flags()
        assert flags["subdir"] and flags["sync"] and not flags["metasync"]
        assert not flags["readahead"]
        assert env.info()["map_size"] == MAP_SIZE
        assert (tmp_path / "lmdb" / "data.mdb").exists()
    finally:
        env.close()


# ----------------------------------------------------------------------------- key codec


def test_key_layout() -> None:
    key = encode_key(5, 1, 258)
    assert key == b"\x00\x00\x00\x05" + b"\x00\x00\x01" + b"\x00" * 4 + b"\x01\x02"
    assert decode_key(key) == (5, 1, 258, None)
    assert decode_key(key + b"\x07") == (5, 1, 258, 7)  # an entry key: block key + index
    assert key_rank(key + b"\x07") == 1


def test_default_rank_keys_are_the_former_layouts() -> None:
    """Priority 0's keys are byte for byte those of the layout before priorities (host u32,
    prio u8 = 1, seq u64), so a state written then resumes in the same order."""
    former = struct.Struct(">IBQ")
    for host_id, seq in [(0, 1), (5, 258), (0xFFFFFFFF, (1 << 48) - 1)]:
        key = encode_key(host_id, rank_of(0), seq)
        assert key == former.pack(host_id, 1, seq)
        assert decode_key(key) == (host_id, DEFAULT_RANK, seq, None)


@pytest.mark.parametrize(
    ("priority", "rank"),
    [(0, 0x10000), (1, 0xFFFF), (65535, 1), (65536, 1), (10**9, 1), (-1, 0x10001),
     (-65535, 0x1FFFF), (-(10**9), 0x1FFFF)],
)  # fmt: skip
def test_rank_of_priority_clamped(priority: int, rank: int) -> None:
    assert rank_of(priority) == rank
    assert rank_of(priority) > 0  # rank 0 stays reserved (before every priority)


@HYPOTHESIS
@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_higher_priority_lower_rank(a: int, b: int) -> None:
    clamp = max(-PRIORITY_MAX, min(PRIORITY_MAX, a)), max(-PRIORITY_MAX, min(PRIORITY_MAX, b))
    assert (rank_of(a) < rank_of(b)) == (clamp[0] > clamp[1])


def test_key_before_sorts_just_before() -> None:
    block = encode_key(3, DEFAULT_RANK, 77)
    for index in (0, 1, 63):
        key = block + bytes((index,))
        before = key_before(key)
        assert before < key
        earlier = [block + bytes((i,)) for i in range(index)] + [encode_key(3, DEFAULT_RANK, 76)
                                                                  + b"\x3f"]  # fmt: skip
        assert all(k <= before for k in earlier)


@pytest.mark.parametrize(
    ("host_id", "rank", "seq"),
    [(-1, 1, 1), (1 << 32, 1, 1), (1, 1 << 24, 1), (1, -1, 1), (1, 1, 1 << 48), (1, 1, -1)],
)
def test_encode_key_rejects(host_id: int, rank: int, seq: int) -> None:
    with pytest.raises(ValueError):
        encode_key(host_id, rank, seq)


@pytest.mark.parametrize("key", [b"", b"\x00" * 12, b"\x00" * 15])
def test_decode_key_rejects(key: bytes) -> None:
    with pytest.raises(ValueError):
        decode_key(key)


_IDS = st.integers(0, (1 << 32) - 1)
_PRIOS = st.integers(0, (1 << 24) - 1)
_SEQS = st.integers(0, (1 << 48) - 1)


@HYPOTHESIS
@given(st.lists(st.tuples(_IDS, _PRIOS, _SEQS), min_size=2, max_size=20))
def test_key_order_is_host_rank_seq_order(triples: list[tuple[int, int, int]]) -> None:
    keys = [encode_key(*t) for t in triples]
    assert sorted(keys) == [encode_key(*t) for t in sorted(triples)]
    assert all(decode_key(encode_key(*t))[:3] == t for t in triples)


# ----------------------------------------------------------------------------- block codec


_ENTRIES = st.builds(
    QueueEntry,
    url=st.text(max_size=100) | st.text(max_size=60).map(lambda p: A + "/" + p),
    depth=st.integers(0, 1 << 30),
    hops=st.integers(0, 100),
    attempt=st.integers(0, 100),
    referrer=st.none() | st.text(max_size=100) | st.text(max_size=60).map(lambda p: A + p),
)


@HYPOTHESIS
@given(st.lists(_ENTRIES, min_size=1, max_size=BLOCK_MAX), st.data())
def test_block_codec_round_trips(entries: list[QueueEntry], data: st.DataObject) -> None:
    mask = data.draw(st.integers(0, (1 << len(entries)) - 1))
    assert decode_block(A, encode_block(A, entries, mask)) == (entries, mask)


_REFERRERS = st.sampled_from(
    [None, f"{A}/", f"{A}/a/b.html", f"{A81}/x", f"{B}/page/1.html", f"{B}", "http://c.demo/p",
     "http://\u00e9.demo/p", "", A]
)  # fmt: skip


@HYPOTHESIS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "/", "/a/b.html", "/a/c", "/\u00e9", "?q=1"])
            | st.text(max_size=20),
            st.sampled_from([A, A81, B, ""]),
            _REFERRERS,
            st.integers(0, 3),
            st.sampled_from([("", b"", 0), ("cb", b"", 0), ("", b"\x80", 0), ("", b"", 5)]),
        ),
        min_size=1,
        max_size=BLOCK_MAX,
    ),
    st.booleans(),
)
def test_block_items_are_each_entrys_item(
    rows: list[tuple[str, str, str | None, int, tuple[str, bytes, int]]], by_id: bool
) -> None:
    """A block's items, worked out once per run of entries sharing a referrer, are the items
    each entry alone gives (``_item``): the stored bytes do not change, and they decode back."""
    from frontier_crawl.frontier.store import _item, _items

    referrers = {r: r for r in (r for _, _, r, _, _ in rows) if r is not None}  # shared objects
    entries = [
        QueueEntry(origin + path, depth, 0, 0, None if r is None else referrers[r], *request)
        for path, origin, r, depth, request in rows
    ]
    ids = {B: 7, A81: 0} if by_id else {}
    ref_host = (lambda o: ids.get(o, -1)) if by_id else None
    host = A.encode()
    assert _items(host, entries, ref_host) == [_item(host, e, ref_host) for e in entries]
    names = {i: o.encode() for o, i in ids.items()}
    assert decode_block(A, encode_block(A, entries, 0, ref_host), names.get) == (entries, 0)


def test_block_format_is_compact() -> None:
    page = f"{A}/articles/2024/05/index.html"
    entries = [QueueEntry(f"{A}/articles/2024/05/article-{i}.html?p=2", 3, referrer=page)
               for i in range(15)]  # fmt: skip
    value = encode_block(A, entries)
    assert value[0] == 15 and value[1] == 1 and value[2:4] == b"\x00\x00"  # n, zlib, mask
    assert len(value) < 15 * 20  # vs ~70 bytes a URL one per value, ~110 in full
    one = encode_block(A, entries[:1], 1)
    assert one[:3] == b"\x01\x00\x01"  # too short to compress; entry 0 done
    assert msgspec.msgpack.decode(one[3:]) == [
        [b"/articles/2024/05/article-0.html?p=2", 3, 0, 0, len(f"{A}/articles/2024/05/"),
         b"index.html"]
    ]  # fmt: skip
    with pytest.raises(ValueError):
        encode_block(A, [])
    with pytest.raises(ValueError):
        encode_block(A, entries * 5)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00",  # n = 0
        b"\x02\x00\x00\x91\x91\xc4\x01/",  # header says 2 items, payload holds 1 (of 1 field)
        b"\x01\x01\x00\xff\xff",  # not DEFLATE
        b"\x01\x00\x00\x91\x94\xc4\x01\xff\x01\x00\x00",  # rest is not UTF-8
    ],
)
def test_decode_block_rejects_garbage(data: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_block(A, data)


# ----------------------------------------------------------------------------- the store


def test_fifo_per_host_one_block_per_host_and_transaction(env: lmdb.Environment) -> None:
    q = Q(env)
    q.put_all([(A, 1, "a1"), (B, 1, "b1"), (A, 1, "a2"), (B, 1, "b2"), (A, 1, "a3")])
    q.put_all([(A, 1, "a4")])
    assert _urls(q.read(A)) == ["a1", "a2", "a3", "a4"]
    assert _urls(q.read(B)) == ["b1", "b2"]
    with env.begin() as txn:
        assert q.store.blocks(txn) == 3


def test_add_returns_the_entry_key(env: lmdb.Environment) -> None:
    q = Q(env)
    first = q.store.next_seq
    keys = q.put_all([(A, 0, "x"), (A, 0, "y")])
    assert [decode_key(k) for k in keys] == [(q.ids[A], 0, first, 0), (q.ids[A], 0, first, 1)]
    assert q.read(A) == [(keys[0], _entry("x")), (keys[1], _entry("y"))]


def test_large_transactions_split_into_blocks(env: lmdb.Environment) -> None:
    q = Q(env)
    n = 2 * BLOCK_MAX + 5
    keys = q.put_all([(A, 1, f"u{i}") for i in range(n)])
    assert len({k[:-1] for k in keys}) == 3
    assert _urls(q.read(A, limit=1000)) == [f"u{i}" for i in range(n)]


def test_priority_band_first(env: lmdb.Environment) -> None:
    q = Q(env)
    q.put_all([(A, 1, "n1"), (A, 1, "n2"), (A, 0, "retry1"), (A, 1, "n3"), (A, 0, "retry2")])
    assert _urls(q.read(A)) == ["retry1", "retry2", "n1", "n2", "n3"]


def test_ranks_order_the_queue_across_transactions(env: lmdb.Environment) -> None:
    """Lower rank (higher priority) first, FIFO within a rank, whatever the transaction."""
    q = Q(env)
    q.put_all([(A, rank_of(0), "z1"), (A, rank_of(-3), "low1"), (A, rank_of(7), "hi1")])
    q.put_all([(A, rank_of(0), "z2"), (A, rank_of(7), "hi2"), (A, rank_of(10**9), "max1")])
    q.put_all([(A, rank_of(-3), "low2"), (A, rank_of(PRIORITY_MAX), "max2")])
    assert _urls(q.read(A)) == ["max1", "max2", "hi1", "hi2", "z1", "z2", "low1", "low2"]


def test_read_after_skips_held_entries_and_release_gives_them_back(
    env: lmdb.Environment,
) -> None:
    q = Q(env)
    keys = q.put_all([(A, DEFAULT_RANK, f"u{i}") for i in range(4)], held=True)
    assert q.read(A) == []  # all held (in memory)
    assert q.store.release(keys[2]) and not q.store.release(keys[2])
    assert _urls(q.read(A)) == ["u2"]
    assert q.store.release(keys[0])
    assert _urls(q.read(A, key_before(keys[0]))) == ["u0", "u2"]  # u1 still held: skipped
    assert q.store.tracked == 1  # the block's record: u1 and u3 are held
    assert q.store.release(keys[1]) and q.store.release(keys[3])
    assert q.store.tracked == 0  # nothing held, nothing pending: forgotten
    assert _urls(q.read(A)) == ["u0", "u1", "u2", "u3"]


def test_read_after_pagination_within_and_across_blocks(env: lmdb.Environment) -> None:
    q = Q(env)
    q.put_all([(A, 1, f"u{i}") for i in range(5)] + [(B, 1, "other")])
    q.put_all([(A, 1, f"u{i}") for i in range(5, 10)])
    pages: list[list[str]] = []
    after: bytes | None = None
    while page := q.read(A, after, 3):
        pages.append(_urls(page))
        after = page[-1][0]
    assert pages == [["u0", "u1", "u2"], ["u3", "u4", "u5"], ["u6", "u7", "u8"], ["u9"]]
    assert q.read(A, None, 0) == []
    with env.begin() as txn:  # a key of another host as cursor gives the head
        assert _urls(q.store.read_after(txn, q.ids[A], A, encode_key(999, 1, 1), 1)) == ["u0"]


def test_done_entries_are_skipped_and_blocks_deleted(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    keys = q.put_all([(A, 1, f"a{i}") for i in range(4)], held=True)
    q.commit(lambda txn: [q.store.done(keys[i]) for i in (0, 2)])
    assert not q.store.done(keys[0])  # twice: no-op
    assert q.read(A) == []  # a1 and a3 are still held (in memory): skipped
    assert q.store.release(keys[1]) and q.store.release(keys[3])
    assert not q.store.release(keys[1]) and not q.store.release(keys[0])  # not held, done
    assert _urls(q.read(A)) == ["a1", "a3"]
    assert q.counts() == {A: 2}
    with env.begin() as txn:
        assert q.store.blocks(txn) == 1
    env.close()
    env = open_env(path, MAP_SIZE)  # a restart reads the masks
    q2 = Q(env)
    q2.ids = q.ids
    assert q2.counts() == {A: 2}
    rows = q2.read(A, hold=True)
    assert _urls(rows) == ["a1", "a3"]
    with env.begin() as txn:  # the block's value is written once; masks go to b"done"
        assert txn.stat(env.open_db(b"done", txn=txn))["entries"] == 1
    q2.commit(lambda txn: [q2.store.done(k) for k, _ in rows])
    with env.begin() as txn:
        assert q2.store.blocks(txn) == 0
        assert txn.stat(env.open_db(b"done", txn=txn))["entries"] == 0
    assert q2.store.tracked == 0
    env.close()


def test_done_is_durable_only_with_its_commit(env: lmdb.Environment) -> None:
    q = Q(env)
    keys = q.put_all([(A, 1, "a0"), (A, 1, "a1")], held=True)

    def fail(txn: lmdb.Transaction) -> None:
        q.store.done(keys[0])
        raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        q.commit(fail)
    assert q.counts() == {A: 2}  # not yet in LMDB
    q.commit(lambda txn: None)  # the next commit writes the pending mask
    assert q.counts() == {A: 1}


def test_open_blocks_are_read_and_dropped_by_an_abort(env: lmdb.Environment) -> None:
    q = Q(env)
    q.put_all([(A, 1, "a0")])

    def add_and_read(txn: lmdb.Transaction) -> list[str]:
        q.add(txn, A, 1, "a1")
        q.add(txn, A, 1, "a2")
        return _urls(q.store.read_after(txn, q.ids[A], A, None, 10))

    assert q.commit(add_and_read) == ["a0", "a1", "a2"]
    q.store.done(b"")  # unknown key: ignored

    def add_then_fail(txn: lmdb.Transaction) -> None:
        q.add(txn, B, 1, "b0")
        raise RuntimeError("abort")

    tracked = q.store.tracked  # A's blocks, whose entries the read above holds
    with pytest.raises(RuntimeError):
        q.commit(add_then_fail)
    assert q.store.tracked == tracked  # B's open block is gone with its transaction
    q.commit(lambda txn: None)
    assert q.counts() == {A: 3}
    with env.begin() as txn:  # B's host id (assigned in the aborted transaction) is written
        assert q.store.origin_of(txn, q.ids[B]) == B
    q.put_all([(B, 1, "b1")])  # and the host can queue again under the same id
    assert _urls(q.read(B)) == ["b1"]


def test_a_block_done_before_its_commit_is_never_written(env: lmdb.Environment) -> None:
    q = Q(env)

    def add_and_finish(txn: lmdb.Transaction) -> None:
        key = q.add(txn, A, 1, "a0", held=True)
        assert q.store.done(key)

    q.commit(add_and_finish)
    with env.begin() as txn:
        assert q.store.blocks(txn) == 0
    assert q.store.tracked == 0


def test_rewrite(env: lmdb.Environment) -> None:
    q = Q(env)
    keys = q.put_all([(A, 1, "a1"), (A, 1, "a2")], held=True)
    retried = QueueEntry("a2", 1, attempt=1)
    q.commit(lambda txn: q.store.done(keys[0]))
    assert q.commit(lambda txn: q.store.rewrite(txn, keys[1], retried))
    assert q.store.release(keys[1])
    assert q.read(A) == [(keys[1], retried)]
    assert not q.commit(lambda txn: q.store.rewrite(txn, keys[0], retried))  # done
    assert not q.commit(lambda txn: q.store.rewrite(txn, b"\x00" * 14, retried))

    b_keys: list[bytes] = []

    def in_open_block(txn: lmdb.Transaction) -> list[str]:
        key = q.add(txn, B, 1, "b1", held=True)
        b_keys.append(key)
        assert q.store.rewrite(txn, key, QueueEntry("b1", 1, attempt=2))
        return [str(e.attempt) for _, e in q.store.read_after(txn, q.ids[B], B, key, 5)]

    assert q.commit(in_open_block) == []
    assert q.read(B) == []  # still held
    assert q.store.release(b_keys[0])
    assert [e.attempt for _, e in q.read(B)] == [2]


def test_a_completion_survives_a_rewrite_in_an_aborted_transaction(tmp_path: Path) -> None:
    """An entry finished in a transaction that also rewrote another entry of its block (a
    retry) and was then aborted is still finished by the next commit: the rewrite's value,
    which carried the mask, went with the abort (before: the URL came back after a restart)."""
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    keys = q.put_all([(A, DEFAULT_RANK, "a1"), (A, DEFAULT_RANK, "a2")], held=True)

    def finish_retry_abort(txn: lmdb.Transaction) -> None:
        assert q.store.done(keys[0])
        assert q.store.rewrite(txn, keys[1], QueueEntry("a2", 1, attempt=1))
        raise _Abort

    with contextlib.suppress(_Abort):
        q.commit(finish_retry_abort)
    q.commit(lambda txn: None)
    env.close()
    env = open_env(path, MAP_SIZE)
    q2 = Q(env)
    q2.ids = q.ids
    assert _urls(q2.read(A)) == ["a2"]
    assert q2.counts() == {A: 1}
    env.close()


def test_host_ids_and_counts_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    q.put_all([(A, 1, "1"), (A, 0, "2"), (B, 1, "3"), (A81, 1, "4"), (A, 1, "5")])
    assert len(set(q.ids.values())) == 3
    assert q.counts() == {A: 3, B: 1, A81: 1}
    env.close()
    env = open_env(path, MAP_SIZE)
    q2 = Q(env)
    with env.begin(write=True) as txn:
        assert {h: q2.store.host_id(txn, h) for h in q.ids} == q.ids
        assert q2.store.host_id(txn, "http://new.demo") == max(q.ids.values()) + 1
        assert q2.store.origin_of(txn, 12345) is None
    assert q2.counts() == {A: 3, B: 1, A81: 1}
    env.close()


def test_restart_never_reuses_a_seq(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    keys = q.put_all([(A, 1, "a1"), (B, 1, "b1"), (A, 1, "a2")])
    env.close()

    env = open_env(path, MAP_SIZE)
    q2 = Q(env)
    q2.ids = q.ids
    used = {decode_key(k)[2] for k in keys}
    assert q2.store.next_seq > max(used)
    more = q2.put_all([(A, 1, "a3")])
    assert _urls(q2.read(A)) == ["a1", "a2", "a3"]
    assert decode_key(more[0])[2] not in used
    env.close()


def test_seq_never_reused_after_an_aborted_transaction(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    store = QueueStore(env)
    with env.begin(write=True) as txn:
        hid = store.host_id(txn, A)
    txn = env.begin(write=True)  # crosses a reservation block and aborts
    for i in range(SEQ_BLOCK + 10):
        store.add(txn, hid + 1 + i, f"http://h{i}", 1, _entry("lost"), False)
    txn.abort()
    store.aborted()
    store = QueueStore(env)  # a fresh store: the aborted blocks are not pending in it
    with env.begin(write=True) as txn:
        hid = store.host_id(txn, A)
        keys = [store.add(txn, hid, A, 1, _entry(f"k{i}"), False) for i in range(3)]
        store.flush(txn)
    store.committed()
    env.close()

    env = open_env(path, MAP_SIZE)
    store = QueueStore(env)
    assert store.next_seq > max(decode_key(k)[2] for k in keys)
    with env.begin() as txn:
        assert store.blocks(txn) == 1
    env.close()


def test_seq_high_water_mark_is_persisted_per_transaction(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    for i in range(3):  # a new transaction each time, always within the first reservation
        q.put_all([(A, 1, f"u{i}")])
    highest = q.store.next_seq - 1
    env.close()
    env = open_env(path, MAP_SIZE)
    assert QueueStore(env).next_seq > highest
    env.close()


def _rss_file_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="Linux only")
def test_release_mapped_pages(tmp_path: Path) -> None:
    env = open_env(tmp_path / "lmdb", 1 << 28)
    q = Q(env)
    for start in range(0, 20_000, 1000):  # incompressible URLs, ~5 MB
        q.put_all([(A, 1, f"{A}/{i:05}/{hash(str(i)) ** 9}") for i in range(start, start + 1000)])
    assert len(q.read(A, None, 20_000)) == 20_000  # touches every page
    before = _rss_file_kb()
    assert release_mapped_pages(env) >= (tmp_path / "lmdb" / "data.mdb").stat().st_size
    assert _rss_file_kb() < before - 2_000  # the touched pages left RSS
    assert len(q.read(A, None, 3)) == 3  # and everything reads back as before
    env.close()


def test_referrers_on_other_hosts_are_stored_by_host_id(env: lmdb.Environment) -> None:
    ids = {B: 7}
    entry = QueueEntry(f"{A}/x", 1, referrer=f"{B}/page/1.html")
    by_id = encode_block(A, [entry], ref_host=lambda o: ids.get(o, -1))
    assert len(by_id) < len(encode_block(A, [entry])) - len(B) + 5
    assert decode_block(A, by_id, lambda i: B.encode() if i == 7 else None) == ([entry], 0)
    with pytest.raises(msgspec.DecodeError):
        decode_block(A, by_id)
    # through the store: the referrer's host id resolves from LMDB, also after a restart
    q = Q(env)
    q.store = QueueStore(env, lambda o: q.ids.get(o, -1))
    q.put_all([(B, 1, f"{B}/page/1.html")])
    q.commit(lambda txn: q.store.add(txn, q.hid(txn, A), A, 1, entry, False))
    assert _urls(q.read(A)) == [entry.url] and q.read(A)[0][1] == entry
    fresh = QueueStore(env)
    with env.begin() as txn:
        assert fresh.read_after(txn, q.ids[A], A, None, 5)[0][1] == entry



@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(1, 30)), max_size=12),
    st.randoms(use_true_random=False),
)
@settings(max_examples=40, database=None, deadline=None)
def test_host_counts_match_the_unfinished_entries(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[int, int, int]], rng: Random
) -> None:
    """Blocks of 1 to 60 URLs on several hosts and both bands, with entries finished in the
    transaction that wrote them (mask in the block) and later (mask in b"done", or the block
    deleted): the scan counts each host's unfinished entries, after a restart too."""
    path = tmp_path_factory.mktemp("counts") / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    hosts = [f"http://h{i}.demo" for i in range(4)]
    unfinished: dict[str, set[bytes]] = {h: set() for h in hosts}
    for round_, (host_i, prio, n) in enumerate(rows):
        host = hosts[host_i]
        n = n * 2 if round_ % 2 else n  # blocks past 8 URLs: masks of two bytes or more

        def queue(txn: lmdb.Transaction, host: str = host, prio: int = prio, n: int = n,
                  r: int = round_) -> None:
            for i in range(n):
                key = q.add(txn, host, prio, f"{host}/{r}/{i}", held=True)
                if rng.random() < 0.3:  # finished before its block is written
                    assert q.store.done(key)
                else:
                    unfinished[host].add(key)

        q.commit(queue)
        later = [k for h in hosts for k in sorted(unfinished[h]) if rng.random() < 0.2]
        q.commit(lambda txn, later=later: [q.store.done(k) for k in later])
        for h in hosts:
            unfinished[h].difference_update(later)
    expected = {h: len(keys) for h, keys in unfinished.items() if keys}
    assert q.counts() == expected
    env.close()
    env = open_env(path, MAP_SIZE)  # a restart
    q2 = Q(env)
    assert q2.counts() == expected
    with env.begin() as txn:
        stored = {h: {k for k, _ in q2.store.read_after(txn, q.ids[h], h, None, 10_000)}
                  for h in expected}  # fmt: skip
    assert stored == {h: unfinished[h] for h in expected}
    env.close()


class _Abort(Exception):
    """Raised inside a transaction to abort it."""


def _scanned(q: Q) -> dict[int, int]:
    with q.env.begin() as txn:
        return {hid: n for hid, n in q.store.scan_host_counts(txn).items() if n}


def _stored(q: Q) -> dict[int, int]:
    with q.env.begin() as txn:
        return q.store.host_counts(txn)


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 70), st.booleans(), st.booleans()),
        max_size=10,
    ),
    st.integers(0, 2**32),
)
@settings(max_examples=25, database=None, deadline=None)
def test_stored_counts_equal_the_scan_through_aborts_rewrites_and_restarts(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[int, int, bool, bool]],
    seed: int,
) -> None:
    """The per-host counts kept in b"counts" (what a restart reads) equal a scan of the
    blocks after every commit, whatever the transactions did: URLs queued and finished in the
    same transaction, finished later, rewritten (a retry), released and read again, and
    transactions aborted after changing all of that; after a restart too. (The choices come
    from a seeded ``Random``: hypothesis's own randoms cost a draw each, thousands here.)"""
    rng = Random(seed)
    path = tmp_path_factory.mktemp("stored") / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    hosts = [f"http://h{i}.demo" for i in range(4)]
    held: list[bytes] = []
    for round_, (host_i, n, abort, restart) in enumerate(rows):
        with contextlib.suppress(_Abort):
            q.commit(functools.partial(_work, q, held, hosts[host_i], n, round_, abort, rng))
        assert _stored(q) == _scanned(q)
        if restart:  # entries held in memory are forgotten; read them again, as a resume does
            env.close()
            env = open_env(path, MAP_SIZE)
            q = Q(env)
            q.ids = {h: i for h in hosts if (i := _host_id(env, h)) >= 0}
            held = [k for h in q.ids for k, _ in q.read(h, limit=10_000, hold=True)]
            assert _stored(q) == _scanned(q)
    env.close()


def _work(
    q: Q, held: list[bytes], host: str, n: int, r: int, abort: bool, rng: Random,
    txn: lmdb.Transaction,
) -> None:  # fmt: skip
    """Finish, rewrite or release some held entries, queue ``n`` URLs (finishing some), maybe
    abort."""
    for key in [k for k in held if rng.random() < 0.3]:
        choice = rng.random()
        if choice < 0.45:
            q.store.done(key)
        elif choice < 0.9:
            q.store.rewrite(txn, key, _entry(f"{host}/retry/{r}"))
        elif q.store.release(key):  # back to LMDB only (read again after a restart)
            held.remove(key)
    for i in range(n):
        key = q.add(txn, host, DEFAULT_RANK, f"{host}/{r}/{i}", held=True)
        if rng.random() < 0.2:
            q.store.done(key)
        else:
            held.append(key)
    if abort:
        raise _Abort


def _host_id(env: lmdb.Environment, host: str) -> int:
    with env.begin() as txn:
        raw = txn.get(b"o" + host.encode(), db=env.open_db(b"hosts", txn=txn))
    return -1 if raw is None else struct.unpack(">I", raw)[0]


def test_a_layout_5_state_gets_its_counts_from_one_scan(tmp_path: Path) -> None:
    """A state written before b"counts" existed (layout 5: neither the database nor its
    marker) gets every host's count from a scan when the store is constructed, once."""
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    q = Q(env)
    keys = q.put_all([(A, DEFAULT_RANK, "1"), (A, DEFAULT_RANK, "2"), (B, 1, "3")], held=True)
    q.commit(lambda txn: q.store.done(keys[0]))
    with env.begin(write=True) as txn:  # make it a layout-5 state
        txn.drop(env.open_db(b"counts", txn=txn), delete=True)
        assert txn.delete(b"counts", db=env.open_db(b"meta", txn=txn))
    env.close()
    env = open_env(path, MAP_SIZE)
    q2 = Q(env)
    with env.begin() as txn:
        assert txn.get(b"counts", db=env.open_db(b"meta", txn=txn)) == b"1"
    assert q2.counts() == {A: 1, B: 1}
    q2.ids = q.ids
    ((key, _),) = q2.read(A, hold=True)
    q2.commit(lambda txn: q2.store.done(key))  # kept from then on
    assert q2.counts() == {B: 1}
    env.close()


def test_queued_hosts_are_the_counts_with_their_origins(tmp_path: Path) -> None:
    """``queued_hosts`` gives what ``host_counts`` and ``origin_of`` give, host by host,
    also with hosts whose queue is empty (no count) between them, and a count whose host has
    no origin stored (None: the caller refuses the state)."""
    env = open_env(tmp_path / "lmdb", MAP_SIZE)
    q = Q(env)
    hosts = [f"http://h{i}.demo" for i in range(7)]
    keys = q.put_all([(h, DEFAULT_RANK, f"{h}/{j}") for h in hosts for j in range(3)], held=True)
    q.commit(lambda txn: [q.store.done(k) for k in keys if k[:4] in (keys[3][:4], keys[15][:4])])
    with env.begin() as txn:
        counts = q.store.host_counts(txn)
        want = [(hid, q.store.origin_of(txn, hid), n) for hid, n in counts.items()]
        assert q.store.queued_hosts(txn) == want
    assert [origin for _, origin, _ in want] == [hosts[i] for i in (0, 2, 3, 4, 6)]
    with env.begin(write=True) as txn:
        hosts_db = env.open_db(b"hosts", txn=txn)
        assert txn.delete(b"i" + struct.pack(">I", q.ids[hosts[4]]), db=hosts_db)
    with env.begin() as txn:
        origins = [origin for _, origin, _ in q.store.queued_hosts(txn)]
    assert origins == [hosts[0], hosts[2], hosts[3], None, hosts[6]]
    env.close()
