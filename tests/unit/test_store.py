"""Tests of the LMDB queue store and its codecs (frontier/store.py), real LMDB in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_crawl.frontier.store import (
    SEQ_BLOCK,
    QueueEntry,
    QueueStore,
    decode_entry,
    decode_key,
    decode_stored,
    encode_entry,
    encode_key,
    encode_stored,
    open_env,
    release_mapped_pages,
)

HYPOTHESIS = settings(max_examples=300, database=None, deadline=None)
MAP_SIZE = 1 << 26
A = "http://a.demo"
A81 = "http://a.demo:81"
B = "https://b.demo"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[lmdb.Environment]:
    environment = open_env(tmp_path / "lmdb", MAP_SIZE)
    yield environment
    environment.close()


def _entry(url: str) -> QueueEntry:
    return QueueEntry(url, 1)


def _urls(rows: list[tuple[bytes, QueueEntry]]) -> list[str]:
    return [entry.url for _, entry in rows]


def _put_all(
    env: lmdb.Environment, store: QueueStore, rows: list[tuple[str, int, str]]
) -> list[bytes]:
    with env.begin(write=True) as txn:
        return [store.put(txn, host, prio, _entry(url)) for host, prio, url in rows]


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
    key = encode_key(A, 1, 258)
    assert key == b"http://a.demo\x00\x01" + b"\x00" * 6 + b"\x01\x02"
    assert decode_key(key) == (A, 1, 258)


@pytest.mark.parametrize(
    ("host", "prio", "seq"),
    [("a\x00b", 1, 1), ("h\u00e9", 1, 1), (A, 256, 1), (A, -1, 1), (A, 1, 1 << 64), (A, 1, -1)],
)
def test_encode_key_rejects(host: str, prio: int, seq: int) -> None:
    with pytest.raises(ValueError):
        encode_key(host, prio, seq)


@pytest.mark.parametrize("key", [b"", b"http://a.demo", b"http://a.demo\x01" + b"\x00" * 9])
def test_decode_key_rejects(key: bytes) -> None:
    with pytest.raises(ValueError):
        decode_key(key)


_HOSTS = st.text(st.characters(min_codepoint=1, max_codepoint=127), max_size=40)
_PRIOS = st.integers(0, 255)
_SEQS = st.integers(0, (1 << 64) - 1)


@HYPOTHESIS
@given(_HOSTS, _PRIOS, _SEQS)
def test_key_codec_round_trips(host: str, prio: int, seq: int) -> None:
    assert decode_key(encode_key(host, prio, seq)) == (host, prio, seq)


@HYPOTHESIS
@given(_HOSTS, st.lists(st.tuples(_PRIOS, _SEQS), min_size=2, max_size=20))
def test_key_order_is_prio_seq_order_within_a_host(host: str, pairs: list[tuple[int, int]]) -> None:
    keys = [encode_key(host, prio, seq) for prio, seq in pairs]
    assert sorted(keys) == [encode_key(host, p, s) for p, s in sorted(pairs)]


@HYPOTHESIS
@given(_HOSTS, _HOSTS, _PRIOS, _SEQS, _PRIOS, _SEQS)
def test_a_host_prefix_never_matches_another_host(
    host: str, other: str, prio: int, seq: int, other_prio: int, other_seq: int
) -> None:
    prefix = host.encode("ascii") + b"\x00"
    other_key = encode_key(other, other_prio, other_seq)
    assert other_key.startswith(prefix) == (other == host)
    assert encode_key(host, prio, seq).startswith(prefix)


# ----------------------------------------------------------------------------- entry codec


_ENTRIES = st.builds(
    QueueEntry,
    url=st.text(max_size=100),
    depth=st.integers(0, 1 << 30),
    hops=st.integers(0, 100),
    attempt=st.integers(0, 100),
    referrer=st.none() | st.text(max_size=100),
)


@HYPOTHESIS
@given(_ENTRIES)
def test_entry_codec_round_trips(entry: QueueEntry) -> None:
    assert decode_entry(encode_entry(entry)) == entry


def test_entry_defaults_and_format() -> None:
    entry = QueueEntry("http://a.demo/", 2)
    assert (entry.hops, entry.attempt, entry.referrer) == (0, 0, None)
    assert msgspec.msgpack.decode(encode_entry(entry)) == ["http://a.demo/", 2, 0, 0, None]
    assert decode_entry(msgspec.msgpack.encode(["http://a.demo/", 2])) == entry


def test_decode_entry_rejects_garbage() -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_entry(b"\xc1")


_PATHS = st.text(max_size=60).map(lambda t: "/" + t)


@HYPOTHESIS
@given(
    _PATHS,
    st.integers(0, 1 << 30),
    st.integers(0, 100),
    st.integers(0, 100),
    st.none() | _PATHS.map(lambda p: A + p) | st.text(max_size=80),
)
def test_stored_codec_round_trips(
    path: str, depth: int, hops: int, attempt: int, referrer: str | None
) -> None:
    entry = QueueEntry(A + path, depth, hops, attempt, referrer)
    data = encode_stored(A, entry)
    assert data[1] in (0xC4, 0xC5, 0xC6)  # compact: the URL's rest is a msgpack bin
    assert decode_stored(A, data) == entry


@HYPOTHESIS
@given(_ENTRIES)
def test_stored_codec_round_trips_any_entry(entry: QueueEntry) -> None:
    assert decode_stored(A, encode_stored(A, entry)) == entry


def test_stored_format_is_compact() -> None:
    url = f"{A}/articles/2024/05/some-article-title.html?page=2"
    referrer = f"{A}/articles/2024/05/index.html"
    entry = QueueEntry(url, 3, referrer=referrer)
    compact = encode_stored(A, entry)
    assert msgspec.msgpack.decode(compact) == [
        url[len(A) :].encode(),
        3,
        0,
        0,
        len(f"{A}/articles/2024/05/"),
        b"index.html",
    ]
    assert len(compact) < 0.65 * len(encode_entry(entry))  # 67 bytes instead of 110
    assert msgspec.msgpack.decode(encode_stored(A, QueueEntry(url, 1))) == [
        url[len(A) :].encode(),
        1,
        0,
        0,
    ]
    # another host's URL (not the frontier's case) keeps the full format
    assert encode_stored(B, entry) == encode_entry(entry)


def test_full_format_values_still_read(env: lmdb.Environment) -> None:
    """Values written before the compact format (or for another host) decode as before."""
    store = QueueStore(env)
    old = QueueEntry(f"{A}/old", 2, 1, 1, "http://elsewhere.demo/")
    with env.begin(write=True) as txn:
        txn.put(encode_key(A, 1, 0), encode_entry(old), db=env.open_db(b"queue", txn=txn))
    new = _put_all(env, store, [(A, 1, f"{A}/new")])[0]
    with env.begin() as txn:
        assert store.read_after(txn, A, None, 10) == [
            (encode_key(A, 1, 0), old),
            (new, QueueEntry(f"{A}/new", 1)),
        ]


@pytest.mark.parametrize(
    "data",
    [
        b"\x92\xc4\x01/\x01",  # 2 fields
        b"\x96\xc4\x01/\x01\x00\x00\xa1x\xc4\x00",  # shared length is a str
        b"\x94\xc4\x01\xff\x01\x00\x00",  # rest is not UTF-8
    ],
)
def test_decode_stored_rejects_garbage(data: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_stored(A, data)


# ----------------------------------------------------------------------------- the store


def test_fifo_per_host(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    _put_all(env, store, [(A, 1, "a1"), (B, 1, "b1"), (A, 1, "a2"), (B, 1, "b2"), (A, 1, "a3")])
    with env.begin() as txn:
        assert _urls(store.read_after(txn, A, None, 10)) == ["a1", "a2", "a3"]
        assert _urls(store.read_after(txn, B, None, 10)) == ["b1", "b2"]


def test_put_returns_the_key(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    first = store.next_seq
    key = _put_all(env, store, [(A, 0, "x")])[0]
    assert decode_key(key) == (A, 0, first)
    with env.begin() as txn:
        assert store.read_after(txn, A, None, 1) == [(key, _entry("x"))]


def test_priority_band_first(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    rows = [(A, 1, "n1"), (A, 1, "n2"), (A, 0, "retry1"), (A, 1, "n3"), (A, 0, "retry2")]
    _put_all(env, store, rows)
    with env.begin() as txn:
        assert _urls(store.read_after(txn, A, None, 10)) == ["retry1", "retry2", "n1", "n2", "n3"]


def test_read_after_pagination(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    _put_all(env, store, [(A, 1, f"u{i}") for i in range(10)] + [(B, 1, "other")])
    pages: list[list[str]] = []
    after: bytes | None = None
    with env.begin() as txn:
        while page := store.read_after(txn, A, after, 3):
            pages.append(_urls(page))
            after = page[-1][0]
    assert pages == [["u0", "u1", "u2"], ["u3", "u4", "u5"], ["u6", "u7", "u8"], ["u9"]]


def test_read_after_a_deleted_key_and_edge_limits(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    keys = _put_all(env, store, [(A, 1, f"u{i}") for i in range(4)])
    with env.begin(write=True) as txn:
        assert store.delete(txn, keys[1])
        assert _urls(store.read_after(txn, A, keys[1], 10)) == ["u2", "u3"]
        assert store.read_after(txn, A, keys[3], 10) == []
        assert store.read_after(txn, A, None, 0) == []
        # a key of another host as cursor: before A's range gives A's head, after it nothing
        assert _urls(store.read_after(txn, A, encode_key("http://0", 1, 1), 1)) == ["u0"]
        assert store.read_after(txn, A, encode_key("http://z", 1, 1), 1) == []


def test_prefix_hosts_are_isolated(env: lmdb.Environment) -> None:
    # b"http://a.demo\x00..." vs b"http://a.demo:81\x00...": ':' (0x3a) != NUL, so A's prefix
    # b"http://a.demo\x00" is never a prefix of an A81 key, and NUL sorts first, keeping A's
    # keys contiguous before every key of a host that extends A.
    store = QueueStore(env)
    _put_all(env, store, [(A81, 1, "x1"), (A, 1, "a1"), (A81, 0, "x0"), (A, 1, "a2")])
    with env.begin() as txn:
        assert _urls(store.read_after(txn, A, None, 10)) == ["a1", "a2"]
        assert _urls(store.read_after(txn, A81, None, 10)) == ["x0", "x1"]
        assert store.read_after(txn, "http://a.dem", None, 10) == []
        assert store.host_counts(txn) == {A: 2, A81: 2}


def test_delete(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    keys = _put_all(env, store, [(A, 1, "a1"), (A, 1, "a2")])
    with env.begin(write=True) as txn:
        assert store.delete(txn, keys[0])
        assert not store.delete(txn, keys[0])
        assert not store.delete(txn, encode_key(B, 1, 999))
    with env.begin() as txn:
        assert _urls(store.read_after(txn, A, None, 10)) == ["a2"]
        assert store.count(txn) == 1


def test_rewrite(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    key = _put_all(env, store, [(A, 1, "a1")])[0]
    retried = QueueEntry("a1", 1, attempt=1)
    with env.begin(write=True) as txn:
        assert store.rewrite(txn, key, retried)
    with env.begin() as txn:
        assert store.read_after(txn, A, None, 10) == [(key, retried)]
        assert store.count(txn) == 1


def test_host_counts_and_count(env: lmdb.Environment) -> None:
    store = QueueStore(env)
    _put_all(env, store, [(A, 1, "1"), (A, 0, "2"), (B, 1, "3"), (A81, 1, "4"), (A, 1, "5")])
    with env.begin() as txn:
        assert store.host_counts(txn) == {A: 3, B: 1, A81: 1}
        assert store.count(txn) == 5
    with env.begin() as txn:
        assert QueueStore(env).host_counts(txn) == {A: 3, B: 1, A81: 1}


def test_restart_keeps_entries_and_never_reuses_a_seq(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    store = QueueStore(env)
    keys = _put_all(env, store, [(A, 1, "a1"), (B, 1, "b1"), (A, 1, "a2")])
    env.close()

    env = open_env(path, MAP_SIZE)
    store = QueueStore(env)
    used = {decode_key(k)[2] for k in keys}
    assert store.next_seq > max(used)
    more = _put_all(env, store, [(A, 1, "a3")])
    with env.begin() as txn:
        assert _urls(store.read_after(txn, A, None, 10)) == ["a1", "a2", "a3"]
        assert store.host_counts(txn) == {A: 3, B: 1}
    assert decode_key(more[0])[2] not in used
    env.close()


def test_seq_never_reused_after_an_aborted_transaction(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    store = QueueStore(env)
    _put_all(env, store, [(A, 1, "first")])
    # a transaction that crosses a reservation block and aborts
    txn = env.begin(write=True)
    for i in range(SEQ_BLOCK + 10):
        store.put(txn, A, 1, _entry(f"lost{i}"))
    txn.abort()
    # later, committed keys use seqs past the aborted reservation
    keys = _put_all(env, store, [(A, 1, f"kept{i}") for i in range(SEQ_BLOCK + 10)])
    env.close()

    env = open_env(path, MAP_SIZE)
    store = QueueStore(env)
    assert store.next_seq > max(decode_key(k)[2] for k in keys)
    with env.begin() as txn:
        assert store.count(txn) == SEQ_BLOCK + 11
    env.close()


def test_seq_high_water_mark_is_persisted_per_transaction(tmp_path: Path) -> None:
    path = tmp_path / "lmdb"
    env = open_env(path, MAP_SIZE)
    store = QueueStore(env)
    for i in range(3):  # a new transaction each time, always within the first block
        _put_all(env, store, [(A, 1, f"u{i}")])
    highest = store.next_seq - 1
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
    store = QueueStore(env)
    _put_all(env, store, [(A, 1, f"{A}/{'x' * 200}/{i}") for i in range(20_000)])
    with env.begin() as txn:
        assert len(store.read_after(txn, A, None, 20_000)) == 20_000  # touches every page
    before = _rss_file_kb()
    assert release_mapped_pages(env) >= (tmp_path / "lmdb" / "data.mdb").stat().st_size
    assert _rss_file_kb() < before - 2_000  # the ~5 MB of touched pages left RSS
    with env.begin() as txn:  # and everything reads back as before
        expected = [f"{A}/{'x' * 200}/{i}" for i in range(3)]
        assert _urls(store.read_after(txn, A, None, 3)) == expected
    env.close()
