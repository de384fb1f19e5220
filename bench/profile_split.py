"""A crawl's py-spy samples split by the part of a page's path they are in, per process.

    .venv/bin/python bench/crawl_vs_scrapy.py --crawlers fc,fc-n2 --reps 1 --profile --keep
    .venv/bin/python bench/profile_split.py --pages 10000 RUN_DIR/runs/fc-n2-0/profile.txt [...]

Reads py-spy's raw (collapsed) output of ``py-spy record --subprocesses -f raw`` (one line per
distinct stack: the chain of processes, then the frames from the root to the leaf, then the
count), sums the files given (say, the reps of one crawler), and prints, for each kind of
process (the main process, or coordinator with ``workers.processes > 1``; the workers; the WARC
writer children), the samples of each part, its share of all the crawl's samples, and its
estimated CPU ms per page: samples / rate / pages. py-spy samples a process only while it is
not idle (blocked in a syscall it counts as idle, unless ``--idle``), but it counts a process
waiting for a core as busy: on a loaded machine the ms/page are inflated; compare shares.

A sample is put in the first part (in the order of ``PARTS``) one of whose patterns occurs in
one of its frames (``function (file``), so an import under the loop counts as start-up and the
crawl log's sync under the group commit as the commit's.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

#: kind of process -> ((part, (patterns, any of which marks it)), ...), first match wins
PARTS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "writer": (
        ("no Python frame (interpreter start and exit, native)", ("<none>",)),
        ("start-up (imports)", ("<frozen importlib",)),
        ("compression (gzip members)", ("gzip_member (",)),
        (
            "record building",
            (
                "record_bytes (",
                "_record (",
                "warcinfo_bytes (",
                "_revisit_fields (",
                "new_record_id (",
                "_sha1_label (",
                "warc_date (",
                "last_header_block (",
                "without_transfer_encoding (",
            ),
        ),
        (
            "file writes, syncs, rotation",
            (
                "_write_all (",
                "Files._write (",
                "Files.flush (",
                "fsync_directory (",
                "Files._open (",
                "Files._finish (",
            ),
        ),
        (
            "IPC: receive, decode, report",
            (
                "read_frame (",
                "_read_exact (",
                "decode_captures (",
                "report_bytes (",
                "serve.<locals>.send (",
                "ready (",
            ),
        ),
        ("other", ("",)),
    ),
    "process": (
        ("no Python frame (interpreter start and exit, native)", ("<none>",)),
        ("start-up: imports", ("<frozen importlib",)),
        ("start-up: settings' types (msgspec, typing)", ("get_class_annotations (", "typing.py")),
        ("commit: crawl log sync", ("commit.py", "crawllog.py")),  # both: see _match
        ("commit: WARC prepare and settle", ("commit.py", "output/warc.py")),
        ("commit: feeds", ("commit.py", "feeds.py")),
        ("commit: queue blocks (encode, puts)", ("commit.py", "frontier/store.py")),
        ("commit: seen-set", ("commit.py", "frontier/seen.py")),
        ("commit: LMDB commit, counters, the rest", ("engine/commit.py",)),
        (
            "IPC: link exchange (outbox, inbox, status)",
            ("engine/exchange.py", "mailbox.py", "workers/peers.py (", "ingest_inbox ("),
        ),
        ("coordinator", ("workers/coordinator.py",)),
        ("spider (callbacks, items)", ("frontier_crawl/spider/",)),
        ("parse (lexbor, walks, resolving)", ("frontier_crawl/parse/",)),
        ("admit (Frontier.add)", ("Frontier.add (", "admission.py", "Frontier.add_many (")),
        (
            "schedule (next_ready, complete, robots gate)",
            (
                "Frontier.next_ready (",
                "Frontier.complete (",
                "frontier/dispatch.py",
                "frontier/completion.py",
                "robotsgate.py",
                "protego",
            ),
        ),
        ("WARC: parent side (captures, send)", ("output/warc.py", "output/warcfile.py")),
        ("crawl log line", ("crawllog.py",)),
        (
            "fetch: libcurl and its callbacks (socket_action)",
            ("MultiLoop._act (", "MultiLoop._on_socket (", "MultiLoop._on_timer ("),
        ),
        ("fetch: results (Transfer.result, decode)", ("fetch/transfer.py", "fetch/decode.py")),
        ("fetch: submit (requests, options)", ("Fetcher.submit (", "fetch/pool.py")),
        ("fetch: poll, the rest", ("frontier_crawl/fetch/",)),
        ("record, counters, status", ("engine/observe.py", "control/")),
        (
            "stop: close, checkpoint, report",
            ("Frontier.close (", "output/report", "Engine.close ("),
        ),
        (
            "start-up: open state",
            ("Engine.__init__ (", "engine/build.py", "Frontier.__init__ (", "Frontier.open ("),
        ),
        ("the loop's own (engine/core.py)", ("engine/core.py",)),
        ("outside the loop (cli, runner, workers' set-up)", ("frontier_crawl/",)),
        ("other", ("",)),
    ),
}

#: parts whose patterns must all occur in the stack (the commit's sub-parts), not any one
_ALL_OF = {
    "commit: crawl log sync", "commit: WARC prepare and settle", "commit: feeds",
    "commit: queue blocks (encode, puts)", "commit: seen-set",
}  # fmt: skip


_PROCESS = re.compile(r'process \d+:"[^"]*"')


def kind_of(chain: list[str]) -> str:
    """The kind of the sampled process, from its command line (the last of the chain)."""
    last = chain[-1]
    if "warcfile" in last:
        return "writer"
    if "spawn_main" in last:
        return "worker"
    return "main"


def _match(part: str, patterns: tuple[str, ...], frames: list[str]) -> bool:
    if part in _ALL_OF:
        return all(any(p in f for f in frames) for p in patterns)
    return any(p in f for f in frames for p in patterns)


def classify(frames: list[str], kind: str) -> str:
    for part, patterns in PARTS["writer" if kind == "writer" else "process"]:
        # a worker's every stack starts in coordinator.py's _worker_entry (its spawn target)
        if part == "coordinator" and kind == "worker":
            continue
        if _match(part, patterns, frames):
            return part
    return "other"


def read(paths: Iterable[Path]) -> Counter[tuple[str, str]]:
    """(kind, part) -> samples over the files."""
    counts: Counter[tuple[str, str]] = Counter()
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, n = line.rpartition(" ")
            if not stack or not n.isdigit():
                continue
            chain = _PROCESS.findall(stack)  # command lines may hold ';' (the writer's does)
            if not chain:
                continue
            frames = _PROCESS.sub("", stack).strip(";").split(";") if stack else []
            frames = [f for f in frames if f] or ["<none>"]
            kind = kind_of(chain)
            counts[(kind, classify(frames, kind))] += int(n)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("profiles", nargs="+", type=Path, help="py-spy raw files (summed)")
    ap.add_argument("--pages", type=int, default=0, help="pages over all the files (for ms/page)")
    ap.add_argument("--rate", type=float, default=250.0, help="py-spy's sampling rate (-r)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = ap.parse_args()
    counts = read(args.profiles)
    total = sum(counts.values())
    if not total:
        raise SystemExit("no samples")
    kinds = [k for k in ("main", "worker", "writer") if any(c[0] == k for c in counts)]
    order = [p for p, _ in PARTS["process"]] + [p for p, _ in PARTS["writer"]]
    per_page = (lambda n: n / args.rate / args.pages * 1000) if args.pages else None
    if args.markdown:
        print("| process | part | samples | share | CPU ms/page |")
        print("|---|---|---|---|---|")
    for kind in kinds:
        rows = sorted(
            ((part, n) for (k, part), n in counts.items() if k == kind),
            key=lambda r: order.index(r[0]) if r[0] in order else len(order),
        )
        sub = sum(n for _, n in rows)
        if not args.markdown:
            est = f", {per_page(sub):.3f} ms/page" if per_page else ""
            print(f"\n== {kind}: {sub} samples, {sub / total:.1%} of the crawl's{est}")
        for part, n in rows:
            ms = f"{per_page(n):.3f}" if per_page else "-"
            if args.markdown:
                print(f"| {kind} | {part} | {n} | {n / total:.1%} | {ms} |")
            else:
                print(f"  {part:<50} {n:>7} {n / total:>7.1%} {ms:>8}")
    all_ms = f", {per_page(total):.3f} ms/page" if per_page else ""
    print(f"\nall processes: {total} samples{all_ms}")


if __name__ == "__main__":
    main()
