"""Per-call costs of frontier/urls.py, seen.py and store.py (timeit, best of 5)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
import timeit
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from frontier_crawl.frontier import urls
from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import DEFAULT_RANK, QueueEntry, QueueStore, open_env
from frontier_crawl.frontier.urls import canonicalize, host_of, join, origin, url_digest

if TYPE_CHECKING:
    import lmdb


def per_call(stmt, number: int, repeat: int = 5) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e6


def row(name: str, us: float) -> None:
    print(f"{name:<58} {us:8.2f} us")


def bench_urls() -> None:
    canon = "https://www.example.org/articles/2024/05/some-article-title.html?page=2&id=17"
    messy = "HTTPS://User@WWW.Example.ORG:443/a/./b/../Caf\u00e9 %7euser/%3a?q=a b#frag"
    upper = "HTTP://WWW.EXAMPLE.ORG/articles/x.html"
    escaped = "https://www.example.org/wiki/Caf%C3%A9_%28film%29"
    idn = "http://b\u00fccher.example/katalog/seite-1.html"
    for name, u in [
        ("canonicalize: canonical ASCII (fast path)", canon),
        ("canonicalize: canonical with escapes (fast path)", escaped),
        ("canonicalize: upper-case scheme/host", upper),
        ("canonicalize: messy (userinfo, dots, UTF-8, escapes, #)", messy),
        ("canonicalize: IDN host (host cached)", idn),
    ]:
        row(name, per_call(lambda u=u: canonicalize(u), 100_000))
    row(
        "  slow path forced on the canonical ASCII URL",
        per_call(lambda: urls._canonicalize_slow(canon), 50_000),
    )
    urls._host_cache.clear()
    row(
        "  IDN host, host cache cleared each call",
        per_call(lambda: (urls._host_cache.clear(), canonicalize(idn)), 20_000),
    )
    base = "https://www.example.org/articles/2024/05/index.html"
    for name, h in [
        ("join: relative path 'other-article.html'", "other-article.html"),
        ("join: absolute path '/tags/python'", "/tags/python"),
        ("join: '../04/older.html'", "../04/older.html"),
        ("join: absolute URL https://...", "https://cdn.example.net/x.js"),
        ("join: '?page=3'", "?page=3"),
        ("join: '#top'", "#top"),
    ]:
        row(name, per_call(lambda h=h: join(base, h), 100_000))
    row(
        "  reference: urllib.parse.urljoin (relative path)",
        per_call(lambda: urljoin(base, "other-article.html"), 50_000),
    )
    row("url_digest (blake2b-128, 76-char URL)", per_call(lambda: url_digest(canon), 200_000))
    row("origin", per_call(lambda: origin(canon), 200_000))
    row("host_of", per_call(lambda: host_of(canon), 200_000))


def bench_seen(tmp: Path) -> None:
    env = open_env(tmp / "seen", 1 << 32)
    n = 50_000
    digests = [hashlib.blake2b(b"u%d" % i, digest_size=16).digest() for i in range(n)]
    seen = SeenSet(env)

    def run(s: SeenSet, ds: list[bytes]) -> float:
        with env.begin(write=True) as txn:
            t0 = time.perf_counter()
            for d in ds:
                s.add_new(txn, d)
            return (time.perf_counter() - t0) / len(ds) * 1e6

    row("add_new: new digest", run(seen, digests))
    row("add_new: repeated digest, recent-cache hit (+LMDB get)", run(seen, digests[-1000:] * 20))
    seen_nc = SeenSet(env, recent_size=0)
    row("add_new: repeated digest, no cache (the LMDB put)", run(seen_nc, digests[-1000:] * 20))
    row(
        "add_new: new digest, no cache",
        run(seen_nc, [hashlib.blake2b(b"v%d" % i, digest_size=16).digest() for i in range(n)]),
    )
    db = env.open_db(b"ref")
    with env.begin(write=True) as txn:
        t0 = time.perf_counter()
        for d in digests:
            txn.put(d, b"", db=db, overwrite=False)
        row(
            "  reference: LMDB put(overwrite=False) of a new digest",
            (time.perf_counter() - t0) / n * 1e6,
        )
        t0 = time.perf_counter()
        for d in digests:
            txn.get(d, db=db)
        row("  reference: LMDB get of a present digest", (time.perf_counter() - t0) / n * 1e6)
    env.close()


def bench_store(tmp: Path) -> None:
    env = open_env(tmp / "queue", 1 << 32)
    store = QueueStore(env)
    hosts = [f"http://host{i}.demo" for i in range(50)]
    with env.begin(write=True) as txn:
        ids = [store.host_id(txn, h) for h in hosts]
    entry = QueueEntry(
        "https://www.example.org/articles/2024/05/some-article-title.html",
        3,
        referrer="https://www.example.org/articles/2024/05/index.html",
    )

    def commit(txn: lmdb.Transaction) -> None:
        store.flush(txn)

    # warm: 100k entries already queued
    with env.begin(write=True) as txn:
        for i in range(100_000):
            store.add(txn, ids[i % 50], hosts[i % 50], DEFAULT_RANK, entry, False)
        commit(txn)
    store.committed()
    res: dict[str, list[float]] = {"add": [], "read": [], "done": [], "commit": []}
    for _ in range(5):
        with env.begin(write=True) as txn:
            t0 = time.perf_counter()
            for i in range(1000):
                store.add(txn, ids[i % 50], hosts[i % 50], DEFAULT_RANK, entry, False)
            commit(txn)
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        store.committed()
        res["add"].append((t1 - t0) / 1000)
        res["commit"].append(t2 - t1)
        keys: list[bytes] = []
        with env.begin() as txn:
            t0 = time.perf_counter()
            for hid, h in zip(ids[:10], hosts[:10], strict=True):
                keys += [k for k, _ in store.read_after(txn, hid, h, None, 100)]
            t1 = time.perf_counter()
        res["read"].append((t1 - t0) / len(keys))
        with env.begin(write=True) as txn:
            t0 = time.perf_counter()
            for k in keys:
                store.done(k)
            commit(txn)
            t1 = time.perf_counter()
        store.committed()
        res["done"].append((t1 - t0) / len(keys))
    row("add: 1000 in one txn (50 hosts), per add, flush included", min(res["add"]) * 1e6)
    row("read_after: 100 entries per host, per entry returned", min(res["read"]) * 1e6)
    row("done: per entry, flush included", min(res["done"]) * 1e6)
    print(
        f"{'commit of a 1000-add txn (fdatasync, sync=True)':<58} {min(res['commit']) * 1e3:8.2f} ms"
    )
    with env.begin(write=True) as txn:
        t0 = time.perf_counter()
        txn.put(b"x", b"y")
    t1 = time.perf_counter()
    print(f"{'commit of a 1-put txn':<58} {(t1 - t0) * 1e3:8.2f} ms")
    with env.begin() as txn:
        n = store.blocks(txn)
        t0 = time.perf_counter()
        store.host_counts(txn)
        t1 = time.perf_counter()
    row(f"host_counts per block ({n} blocks)", (t1 - t0) / n * 1e6)
    env.close()


if __name__ == "__main__":
    tmp = Path(tempfile.mkdtemp(prefix="fcbench-", dir=os.environ.get("BENCH_DIR", "/tmp")))
    try:
        bench_urls()
        bench_seen(tmp)
        bench_store(tmp)
    finally:
        shutil.rmtree(tmp)
