"""The demo crawl's outputs from two trees, compared (issue 19, "the crawl outputs of the demo
the same"): each tree runs ``frontier-crawl demo`` (the README's command) with its own venv,
alternately, ``--runs`` times; what a run leaves is reduced to what must not depend on timing:

* pages: the URLs the demo server answered 200 (its printed summary) and the crawl log's
  ``fetched`` URLs;
* crawl log: every line without ``time``, ``duration_s`` and ``held_s`` (a set: the order of
  concurrent transfers is not the crawl's behaviour), and the same without ``depth`` and
  ``referrer`` (which page linked to a URL first depends on which transfer ended first);
* WARC: (record type, target URI, payload digest) of every record, as a multiset;
* report: every counter, without the timings (``elapsed_s``, ``loop_s``...) and the paths.

The port of the demo web (random) is replaced by ``PORT`` everywhere. It prints, for each
aspect, whether it is the same in every run of both trees, and the differences when not.

    python3 bench/demo_compare.py /work/wt-old /work/main [--runs 2]

Each tree needs ``.venv/bin/frontier-crawl`` (``pip install -e .``). About 10 s per run.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

#: crawl-log fields that are times, not behaviour
LOG_TIMES = ("time", "duration_s", "held_s")
#: crawl-log fields that depend on which of the concurrent transfers ended first
LOG_ORDER = ("depth", "referrer")
#: report keys that are timings, paths or figures of the machine, not counters of the crawl
REPORT_TIMES = {
    "elapsed_s",
    "pages_per_s",
    "loop_s",
    "pages_over_time",
    "output_dir",
    "warc_files",
    "host_held_s",
    "rate_bucket_s",
    "disk_space_paused_s",
}
PORT = re.compile(r"(127\.0\.0\.1|\.demo):\d+")
PORT_BYTES = re.compile(rb"(127\.0\.0\.1|\.demo):\d+")


def _sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def unport(text: str) -> str:
    return PORT.sub(r"\1:PORT", text)


def run_demo(tree: Path, out: Path) -> dict[str, Any]:
    """Run the tree's demo into ``out``; its outputs reduced to what is compared."""
    proc = subprocess.run(
        [str(tree / ".venv" / "bin" / "frontier-crawl"), "demo", "--output", str(out)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    said = " ".join(proc.stdout.split())
    summary = re.search(r"server log: (\d+) requests; expected pages fetched (\d+)/(\d+)", said)
    lines = [json.loads(unport(x)) for x in (out / "crawl.jsonl").read_text().splitlines()]
    warc = Counter()
    for path in sorted((out / "warc").glob("*.warc*")):
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                payload = rec.raw_stream.read()  # the entity as sent (what the digest covers)
                h = rec.rec_headers
                uri = unport(h.get_header("WARC-Target-URI") or "")
                digest = h.get_header("WARC-Payload-Digest")
                if digest is None:
                    warc[(rec.rec_type, uri, "")] += 1
                    continue
                # the pages link to the demo's random port: digest them with it replaced too
                ours = hashlib.sha1(PORT_BYTES.sub(rb"\1:PORT", payload)).hexdigest()
                ok = "" if digest == _sha1_b32(payload) else " (its WARC-Payload-Digest WRONG)"
                warc[(rec.rec_type, uri, ours + ok)] += 1
    report = json.loads(unport((out / "report.json").read_text()))
    depths = Counter((x["outcome"], x["depth"]) for x in lines)
    return {
        "exit status": proc.returncode,
        "server summary": summary.groups() if summary else said[-300:],
        "pages fetched": sorted(x["url"] for x in lines if x["outcome"] == "fetched"),
        "crawl log (no times)": sorted(
            json.dumps(_drop(x, LOG_TIMES), sort_keys=True) for x in lines
        ),
        "crawl log (no times, depth, referrer)": sorted(
            json.dumps(_drop(x, LOG_TIMES + LOG_ORDER), sort_keys=True) for x in lines
        ),
        "WARC records (type, URI, payload digest)": sorted(f"{k} x{n}" for k, n in warc.items()),
        "WARC record types": dict(sorted(Counter(k[0] for k in warc.elements()).items())),
        "crawl log: lines by (outcome, depth)": sorted(depths.items()),
        **{f"report: {k}": v for k, v in _counters(report).items()},
    }


def _drop(line: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k not in keys}


def _counters(report: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The report's values by dotted key, without its timings."""
    kept: dict[str, Any] = {}
    for key, value in report.items():
        if key in REPORT_TIMES:
            continue
        if key == "slowest_hosts":  # their mean fetch times and order are timings
            value = sorted((h["host"], h["pages"], h["failures"]) for h in value)
        if isinstance(value, dict):
            kept.update(_counters(value, f"{prefix}{key}."))
        else:
            kept[prefix + key] = value
    return kept


def differences(a: Any, b: Any) -> str:
    """A short account of how ``b`` differs from ``a``."""
    if isinstance(a, list) and isinstance(b, list):
        only_a, only_b = (
            sorted(set(map(str, a)) - set(map(str, b))),
            sorted(set(map(str, b)) - set(map(str, a))),
        )
        return f"{len(only_a)} only in the first, {len(only_b)} only in the second; e.g. {only_a[:2]} / {only_b[:2]}"
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return "; ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k))
    return f"{a!r} -> {b!r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--runs", type=int, default=2, help="runs of each tree, alternated")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="demo-compare-") as tmp:
        for i in range(args.runs):
            for name, tree in (("old", args.old), ("new", args.new)):
                runs[name].append(run_demo(tree, Path(tmp) / f"{name}{i}"))
    aspects = list(dict.fromkeys(k for rs in runs.values() for r in rs for k in r))
    between = 0
    for aspect in aspects:
        old = [r.get(aspect) for r in runs["old"]]
        new = [r.get(aspect) for r in runs["new"]]
        values = old + new
        size = len(values[0]) if isinstance(values[0], list | dict) else values[0]
        if all(v == values[0] for v in values):
            print(f"same in all {len(values)} runs: {aspect} ({size})")
        elif any(v != old[0] for v in old) or any(v != new[0] for v in new):
            print(f"varies from run to run within a tree: {aspect}")
            for i, v in enumerate(values[1:], 2):
                if v != values[0]:
                    print(
                        f"  run 1 vs run {i} ({'old' if i <= len(old) else 'new'}): {differences(values[0], v)}"
                    )
        else:
            between += 1
            print(f"DIFFERS between the trees (same within each): {aspect}")
            print(f"  old vs new: {differences(old[0], new[0])}")
    return 1 if between else 0


if __name__ == "__main__":
    sys.exit(main())
