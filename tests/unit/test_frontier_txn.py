"""frontier/txn.py on its own, over a real LMDB environment."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier.txn import Transactions


def make(tmp_path: Path) -> tuple[lmdb.Environment, Transactions, list[str]]:
    env = lmdb.open(str(tmp_path / "env"), map_size=1 << 24)
    calls: list[str] = []

    def flush(txn: lmdb.Transaction[bytes]) -> None:
        calls.append("flush")
        txn.put(b"flushed", b"1")

    tx = Transactions(env, tmp_path / "env", flush=flush, aborted=lambda: calls.append("aborted"),
                      committed=lambda: calls.append("committed"))  # fmt: skip
    return env, tx, calls


def read(env: lmdb.Environment, key: bytes) -> bytes | None:
    with env.begin() as txn:
        value = txn.get(key)
    return bytes(value) if value is not None else None


def test_a_batch_is_one_transaction_flushed_then_committed(tmp_path: Path) -> None:
    env, tx, calls = make(tmp_path)
    with tx.batch():
        with tx.write() as a:
            a.put(b"a", b"1")
        with tx.batch(), tx.write() as b:  # nested: the same transaction
            assert b is a and tx.txn is a
            b.put(b"b", b"2")
        assert read(env, b"a") is None  # not committed yet
    assert tx.txn is None
    assert calls == ["flush", "committed"]
    assert (read(env, b"a"), read(env, b"b"), read(env, b"flushed")) == (b"1", b"2", b"1")
    env.close()


def test_an_exception_aborts_the_batch_and_the_parts_are_told(tmp_path: Path) -> None:
    env, tx, calls = make(tmp_path)
    with pytest.raises(RuntimeError), tx.batch():
        with tx.write() as txn:
            txn.put(b"a", b"1")
        raise RuntimeError("tick failed")
    assert calls == ["aborted"] and tx.txn is None
    assert read(env, b"a") is None and read(env, b"flushed") is None
    env.close()


def test_a_write_outside_a_batch_commits_on_its_own(tmp_path: Path) -> None:
    env, tx, calls = make(tmp_path)
    with tx.write() as txn:
        txn.put(b"a", b"1")
    with tx.write() as txn:
        txn.put(b"b", b"1")
    assert calls == ["flush", "committed"] * 2
    assert read(env, b"a") == read(env, b"b") == b"1"
    env.close()
