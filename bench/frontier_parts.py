"""A new link's path through the frontier's own modules, part by part, in one process.

``frontier_scale.py`` times the whole ``Frontier.add``/``next_ready``/``complete``; this times
the parts ``urls.py``, ``seen.py`` and ``store.py`` contribute to a new link, on the same
generated links (``frontier_scale.Pages``: 20 links a page, 15 on the page's host, the page as
referrer), each part alone over every link, best of ``--repeat`` passes of CPU time:

* ``canonicalize`` of an already canonical URL (the common case), ``origin``;
* ``url_digest`` (BLAKE2b of the host, cached, then of the URL);
* ``trap_reason`` with the default limits (``traps.Limits()``);
* ``SeenSet.add_new`` of a new digest in one open LMDB write transaction (recent cache, the
  exact ``b"seen"`` put, which is also the membership check);
* ``QueueStore.add`` (appending to the host's open block), then ``flush`` (block encoding and
  the LMDB puts, per URL) and the commit (``fdatasync``), one transaction per 64 pages as the
  engine's group commit writes about that many;
* ``encode_block`` alone, per URL.

Usage::

    .venv/bin/python bench/frontier_parts.py                 # 200,000 links
    .venv/bin/python bench/frontier_parts.py --links 1e6
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from frontier_scale import Pages

from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import (
    DEFAULT_RANK,
    QueueEntry,
    QueueStore,
    encode_block,
    open_env,
)
from frontier_crawl.frontier.traps import Limits, trap_reason
from frontier_crawl.frontier.urls import canonicalize, origin, url_digest


def best(repeat: int, fn: Callable[[], object]) -> float:
    out = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        out = min(out, time.process_time() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=float, default=2e5)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    n = int(args.links)
    pages = Pages(args.hosts, 20, 15)
    page_list: list[tuple[str, list[str]]] = [pages.next_page() for _ in range(n // 20)]
    links = [u for _, ls in page_list for u in ls]
    n = len(links)
    rows: list[tuple[str, float]] = []

    def per_url(name: str, seconds: float) -> None:
        rows.append((name, seconds / n * 1e6))
        print(f"{name:48s} {seconds / n * 1e6:7.2f} us per link", flush=True)

    per_url(
        "canonicalize (canonical URL)", best(args.repeat, lambda: [canonicalize(u) for u in links])
    )
    per_url("origin", best(args.repeat, lambda: [origin(u) for u in links]))
    per_url("url_digest", best(args.repeat, lambda: [url_digest(u) for u in links]))
    limits = Limits()
    per_url("trap_reason", best(args.repeat, lambda: [trap_reason(u, 1, limits) for u in links]))
    digests = [url_digest(u) for u in links]
    with tempfile.TemporaryDirectory(prefix="frontier-parts-", dir=args.dir) as tmp:
        env = open_env(Path(tmp) / "lmdb", 1 << 36)
        def seen_pass() -> None:
            seen = SeenSet(env)
            with env.begin(write=True) as txn:
                t0 = time.process_time()
                for d in digests:
                    seen.add_new(txn, d)
                seen_pass.cpu = time.process_time() - t0  # type: ignore[attr-defined]
                txn.abort()

        cpus = []
        for _ in range(args.repeat):
            seen_pass()
            cpus.append(seen_pass.cpu)  # type: ignore[attr-defined]
        per_url("SeenSet.add_new, new digest", min(cpus))

        store = QueueStore(env)
        entries = [(origin(u), QueueEntry(u, 1, referrer=ref)) for ref, ls in page_list for u in ls]
        ids: dict[str, int] = {}
        add_s = flush_s = commit_s = 0.0
        step = 64 * 20
        for start in range(0, n, step):
            with env.begin(write=True) as txn:
                t0 = time.process_time()
                for host, entry in entries[start : start + step]:
                    hid = ids.get(host)
                    if hid is None:
                        hid = ids[host] = store.host_id(txn, host)
                    store.add(txn, hid, host, DEFAULT_RANK, entry, False)
                t1 = time.process_time()
                store.flush(txn)
                t2 = time.process_time()
            t3 = time.process_time()
            store.committed()
            add_s += t1 - t0
            flush_s += t2 - t1
            commit_s += t3 - t2
        per_url("QueueStore.add (host ids included)", add_s)
        per_url("QueueStore.flush (encode + puts + counts)", flush_s)
        per_url("commit (CPU; fdatasync wait not counted)", commit_s)
        blocks: dict[str, list[QueueEntry]] = {}
        for host, entry in entries[: 64 * 20]:
            blocks.setdefault(host, []).append(entry)
        sample = sum(len(b) for b in blocks.values())
        enc = best(args.repeat * 5, lambda: [encode_block(h, b) for h, b in blocks.items()])
        rows.append(("encode_block", enc / sample * 1e6))
        print(f"{'encode_block (one transaction of 64 pages)':48s} {enc / sample * 1e6:7.2f} us "
              f"per link ({sample / len(blocks):.1f} URLs per block)")  # fmt: skip
        env.close()


if __name__ == "__main__":
    main()
