"""CPU profile of every Python process of one crawl: the main one (or coordinator) and each
worker, with ``time.process_time`` as the clock (CPU seconds, not wall: a process waiting for
a core on a loaded machine is not counted, unlike a sampling profiler's).

    .venv/bin/python bench/cpu_profile.py OUT -- --config crawl.toml     # profile one crawl
    .venv/bin/python bench/cpu_profile.py OUT --show [--pages N]         # its summary again

Runs ``frontier-crawl ARGS`` in this process under cProfile, with ``FRONTIER_CRAWL_PROFILE``
set to OUT so that each worker process (``workers.processes > 1``) profiles its own run the
same way (``workers/peers.py``); writes ``OUT/main.prof`` and ``OUT/worker-<i>.prof``, then
prints, per process, its CPU seconds by part of a page's path (the functions named in
``PARTS``, cumulative) and the top functions by own time. The WARC writer children are not
profiled (``bench/warc_writer.py`` is theirs). cProfile's own overhead inflates call-heavy
code (about 1.5x here), so compare shares and before/after, not absolute figures.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

#: part of the path -> functions (file suffix, name) whose cumulative time it is
PARTS: dict[str, tuple[tuple[str, str], ...]] = {
    "start-up (imports, opening state)": (("cli.py", "main"),),
    "engine run (all of the loop)": (("core.py", "run"),),
    "open (Engine.__init__)": (("core.py", "__init__"),),
    "handle a result (_handle)": (("core.py", "_handle"),),
    "parse links": (("links.py", "extract_links"),),
    "fetch poll": (("fetcher.py", "poll"),),
    "frontier add (admission)": (("frontier.py", "add"),),
    "frontier next_ready": (("frontier.py", "next_ready"),),
    "frontier complete": (("frontier.py", "complete"),),
    "group commit": (("commit.py", "commit"),),
    "peer exchange swap": (("exchange.py", "swap"),),
    "  ingest inbox": (("frontier.py", "ingest_inbox"),),
    "  publish status": (("peers.py", "publish"),),
    "deliver batches": (("exchange.py", "_deliver"),),
    "  mailbox send": (("mailbox.py", "send"),),
    "stage outbox": (("exchange.py", "_stage"),),
    "coordinator wait": (("coordinator.py", "_wait_for_the_end"),),
    "close / checkpoint": (("frontier.py", "close"),),
}


def summary(out: Path, pages: int) -> None:
    for prof in sorted(out.glob("*.prof")):
        st = pstats.Stats(str(prof))
        total = st.total_tt  # type: ignore[attr-defined]
        print(f"\n== {prof.stem}: {total:.2f} CPU s (under cProfile)"
              + (f", {total / pages * 1000:.3f} ms/page of {pages}" if pages else ""))
        raw = st.stats  # type: ignore[attr-defined]
        for part, funcs in PARTS.items():
            cum = 0.0
            for (file, _line, name), (_cc, _nc, _tt, ct, _callers) in raw.items():
                if any(file.endswith(f) and name == n for f, n in funcs):
                    cum = max(cum, ct)
            if cum:
                print(f"  {part:38s} {cum:7.2f} s {100 * cum / total:5.1f}%")
        top = sorted(raw.items(), key=lambda kv: -kv[1][2])[:12]
        print("  top own time:")
        for (file, line, name), (_cc, nc, tt, _ct, _callers) in top:
            print(f"    {tt:6.2f} s {nc:9d} calls  {name}  {file.rsplit('/', 2)[-2:]}:{line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--show", action="store_true", help="only print the summary of OUT")
    ap.add_argument("--pages", type=int, default=0, help="pages fetched (for ms/page)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- frontier-crawl arguments")
    args = ap.parse_args()
    if not args.show:
        args.out.mkdir(parents=True, exist_ok=True)
        for old in args.out.glob("*.prof"):
            old.unlink()
        os.environ["FRONTIER_CRAWL_PROFILE"] = str(args.out.resolve())
        from frontier_crawl.cli import main as crawl

        argv = [a for a in args.args if a != "--"]
        prof = cProfile.Profile(time.process_time)
        with contextlib.suppress(SystemExit):
            prof.runcall(crawl, argv)
        prof.dump_stats(str(args.out / "main.prof"))
    summary(args.out, args.pages)


if __name__ == "__main__":
    sys.exit(main())
