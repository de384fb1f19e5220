"""Where the suite's time goes: each test's wall and CPU seconds, from a run with
``--test-times PATH`` (tests/conftest.py), the tests that mostly wait listed apart.

    .venv/bin/python -m pytest -q -n 4 --dist worksteal --test-times /tmp/times.json
    .venv/bin/python bench/suite_times.py /tmp/times.json [--top 40]

CPU is the test's process (its threads: the test servers) and the children it reaped (the
crawler processes and theirs), setup to teardown. A test "waits" where its CPU is under half
its wall time: a politeness window, a server's delay, a crawl's subprocess sleeping. On a
loaded machine wall times stretch; CPU seconds hardly do.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("times", type=Path)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    times: dict[str, dict[str, float]] = json.loads(args.times.read_text())
    wall = sum(t["wall_s"] for t in times.values())
    cpu = sum(t["cpu_s"] for t in times.values())
    print(f"{len(times)} tests: {wall:.0f} s of wall time, {cpu:.0f} s of CPU ({cpu / wall:.0%})")
    waiting = {k: t for k, t in times.items() if t["cpu_s"] < t["wall_s"] / 2}
    w_wall = sum(t["wall_s"] for t in waiting.values())
    w_cpu = sum(t["cpu_s"] for t in waiting.values())
    print(
        f"mostly waiting (CPU < wall / 2): {len(waiting)} tests, {w_wall:.0f} s wall, {w_cpu:.0f} s CPU"
    )
    by_file: dict[str, list[float]] = {}
    for k, t in times.items():
        f = by_file.setdefault(k.split("::")[0], [0.0, 0.0, 0])
        f[0] += t["wall_s"]
        f[1] += t["cpu_s"]
        f[2] += 1
    print(f"\n{'wall s':>7} {'cpu s':>7} {'cpu%':>5} {'tests':>5}  file (top {args.top // 2})")
    for name, (w, c, n) in sorted(by_file.items(), key=lambda x: -x[1][0])[: args.top // 2]:
        print(f"{w:7.1f} {c:7.1f} {c / max(w, 0.01):5.0%} {n:5d}  {name}")
    print(f"\n{'wall s':>7} {'cpu s':>7} {'cpu%':>5}  test (top {args.top} by wall)")
    for name, t in sorted(times.items(), key=lambda x: -x[1]["wall_s"])[: args.top]:
        mark = "  waits" if name in waiting else ""
        print(
            f"{t['wall_s']:7.1f} {t['cpu_s']:7.1f} {t['cpu_s'] / max(t['wall_s'], 0.01):5.0%}  {name}{mark}"
        )


if __name__ == "__main__":
    main()
