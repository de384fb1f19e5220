"""The workers' status, progress and reports merged into the crawl's (pure functions)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from frontier_crawl.control.status import BOTTLENECKS, empty_status
from frontier_crawl.figures import merge_this_run, per_second
from frontier_crawl.output import (
    LogHistogram,
    merge_rate_buckets,
)

_STATES = ("stopping", "running", "paused", "starting", "finished")


def merge_progress(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """One progress snapshot from the workers' latest ones: counts and rates added (each
    worker's pages per second over its last ten seconds), the crawl's time the longest of
    the workers' (every run), this run's figures merged, the bottleneck most workers name."""
    merged: dict[str, Any] = {"pages": 0, "queued": 0, "in_flight": 0, "hosts": 0,
                              "pages_per_s": 0.0, "elapsed_s": 0.0}  # fmt: skip
    for snap in snaps:
        for key, value in snap.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                merged[key] = merged.get(key, 0) + value
    merged["elapsed_s"] = max((float(s.get("elapsed_s", 0.0)) for s in snaps), default=0.0)
    merged["this_run"] = merge_this_run([s.get("this_run") for s in snaps])
    merged["continuous"] = any(s.get("continuous") for s in snaps)
    merged["paused_for_space"] = any(s.get("paused_for_space") for s in snaps)
    named = Counter(str(s["bottleneck"]).partition(":")[0] for s in snaps if s.get("bottleneck"))
    if named:
        name, count = named.most_common(1)[0]
        first = next(str(s["bottleneck"]) for s in snaps if str(s["bottleneck"]).startswith(name))
        who = "all workers" if count == len(snaps) else f"{count} of {len(snaps)} workers"
        detail = first.partition(":")[2].strip()
        merged["bottleneck"] = first if len(snaps) == 1 else f"{name}: {who}, e.g. {detail}"

    if any("items" in s for s in snaps):
        merged["callback_ms"] = max(tuple(s["callback_ms"]) for s in snaps if "items" in s)
        merged["pipeline_ms"] = max(tuple(s["pipeline_ms"]) for s in snaps if "items" in s)
        merged["spider_share"] = max(float(s.get("spider_share", 0)) for s in snaps)
    merged.pop("worker", None)
    return merged


def merge_status(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """One status from the workers' snapshots: counters added, the most telling state."""
    if not snaps:  # every key present all the same (the seam)
        empty = empty_status("starting")
        empty["bottleneck"] = {"name": "idle", "detail": "no worker has reported yet"}
        return empty
    merged: dict[str, Any] = {}
    for snap in snaps:
        for key, value in snap.items():
            if key in ("history", "worker", "workers", "state", "bottleneck", "busiest_hosts",
                       "failing_hosts", "cpu", "blocked_hosts", "host_delays", "paused",
                       "freshness"):  # fmt: skip
                continue
            merged[key] = _merge(merged.get(key), value)
    states = [s.get("state", "running") for s in snaps]
    merged["state"] = next((s for s in _STATES if s in states), states[0])
    merged["paused"] = all(s.get("paused") for s in snaps)
    merged["bottleneck"] = _merge_bottlenecks(snaps)
    merged["blocked_hosts"] = snaps[0].get("blocked_hosts", [])
    merged["host_delays"] = snaps[0].get("host_delays", {})
    merged["cpu"] = _merge_cpu([s.get("cpu", {}) for s in snaps])
    merged["freshness"] = merge_freshness([s.get("freshness") or {} for s in snaps])
    merged["elapsed_s"] = max(float(s.get("elapsed_s", 0.0)) for s in snaps)
    merged["this_run"] = merge_this_run([s.get("this_run") for s in snaps])
    for key in ("busiest_hosts", "failing_hosts"):
        rows = [row for s in snaps for row in s.get(key, [])]
        sort = "pages" if key == "busiest_hosts" else "failures"
        merged[key] = sorted(rows, key=lambda r: -float(r.get(sort, 0)))[:10]
    merged["history"] = []
    merged["workers"] = [{k: v for k, v in s.items() if k != "history"} for s in snaps]
    return merged


def _merge_bottlenecks(snaps: list[dict[str, Any]]) -> dict[str, str]:
    """The bottleneck most workers name (ties: the first in ``BOTTLENECKS`` order, draining
    and paused before the rest), and what each of those workers says."""
    named = [(int(s.get("worker", i)), s.get("bottleneck") or {}) for i, s in enumerate(snaps)]
    counts = Counter(str(b.get("name", "idle")) for _w, b in named)
    order: dict[str, int] = {n: i for i, n in enumerate(("draining", "paused", *BOTTLENECKS))}
    name = min(counts, key=lambda n: (-counts[n], order.get(n, len(order))))
    if "redis-full" in counts:  # a fault that stops the node unless fixed: whoever names it
        name = "redis-full"
    details = [(w, str(b.get("detail", ""))) for w, b in named if b.get("name") == name]
    if len(snaps) == 1:
        return {"name": name, "detail": details[0][1]}
    who = "all workers" if len(details) == len(snaps) else f"{len(details)} of {len(snaps)} workers"
    said = "; ".join(f"worker {w}: {d}" for w, d in details[:3])
    return {"name": name, "detail": f"{who}: {said}" + ("; ..." if len(details) > 3 else "")}


def _merge_cpu(cpus: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean loop busy fraction; each share weighted by its worker's busy time."""
    busy = [float(c.get("loop_busy", 0.0)) for c in cpus]
    total = sum(busy)
    shares: dict[str, float] = {}
    for c, b in zip(cpus, busy, strict=True):
        for key, value in (c.get("shares") or {}).items():
            shares[key] = shares.get(key, 0.0) + float(value) * (b / total if total else 0.0)
    return {
        "loop_busy": round(total / len(cpus), 4) if cpus else 0.0,
        "shares": {k: round(v, 4) for k, v in shares.items()},
    }


def merge_reports(reports: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One report from the workers' reports: counts added, dicts merged, rates recomputed."""
    merged: dict[str, Any] = {}
    for report in reports:
        for key, value in report.items():
            merged[key] = _merge(merged.get(key), value)
    elapsed = max((float(r.get("elapsed_s", 0.0)) for r in reports), default=0.0)
    merged["elapsed_s"] = elapsed
    merged["pages_per_s"] = round(per_second(merged.get("fetched", 0), elapsed), 3)
    merged["this_run"] = merge_this_run([r.get("this_run") for r in reports])
    merged["complete"] = all(r.get("complete") for r in reports) and bool(reports)
    merged["stopped_by_signal"] = any(r.get("stopped_by_signal") for r in reports)
    merged["stopped_for_low_space"] = any(r.get("stopped_for_low_space") for r in reports)
    merged["write_error"] = next((r["write_error"] for r in reports if r.get("write_error")), None)
    # each worker's pages over time, on the coarsest bucket width of them all, summed
    merged["rate_bucket_s"], merged["pages_over_time"] = merge_rate_buckets(
        [(float(r.get("rate_bucket_s", 60.0)), r.get("pages_over_time", [])) for r in reports]
    )
    merged["runs"] = max((int(r.get("runs", 0)) for r in reports), default=0)  # side by side
    if any("freshness" in r for r in reports):
        merged["freshness"] = merge_freshness([r.get("freshness") or {} for r in reports])
    for key, order in (("slowest_hosts", "mean_fetch_s"), ("failing_hosts", "failures")):
        rows = [row for r in reports for row in r.get(key, [])]  # hosts are partitioned
        merged[key] = sorted(rows, key=lambda row: -row.get(order, 0))[:10]
    spider = merged.get("spider")
    if isinstance(spider, dict):  # histograms merged bucket by bucket, quantiles read again
        busy = sum(float(r.get("elapsed_s", 0.0)) for r in reports)  # the workers' loops
        for key in ("callback", "pipelines"):
            if isinstance(spider.get(key), dict):
                spider[key] = LogHistogram.from_summary(spider[key]).summary(busy)
    return merged


def merge_freshness(parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``freshness`` dict (docs/continuous.md) from the workers': counts and rates added, the
    interval histograms added bucket by bucket, the soonest next due time, and the workers'
    worst overdue figures (a quantile of the union is not kept: the worst worker's is shown)."""
    if not parts or not all(p.get("enabled") for p in parts):
        return {"enabled": False}
    out: dict[str, Any] = {"enabled": True}
    for key in ("scheduled", "due_now"):
        out[key] = sum(int(p.get(key) or 0) for p in parts)
    out["due_now_capped"] = any(p.get("due_now_capped") for p in parts)
    for key, pick in (("next_due_s", min), ("overdue_p50_s", max), ("overdue_p99_s", max)):
        values = [float(p[key]) for p in parts if p.get(key) is not None]
        out[key] = pick(values) if values else None
    for key in ("visits", "per_hour"):
        total: dict[str, Any] = {}
        for p in parts:
            for name, n in (p.get(key) or {}).items():
                total[name] = total.get(name, 0) + n
        out[key] = total
    first = parts[0].get("intervals") or {}
    counts = [0] * len(first.get("counts", []))
    for p in parts:
        for i, n in enumerate((p.get("intervals") or {}).get("counts", [])[: len(counts)]):
            counts[i] += int(n)
    out["intervals"] = {"le_s": list(first.get("le_s", [])), "counts": counts}
    return out


def _merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if isinstance(a, bool) or isinstance(b, bool):
        return a and b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + b
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a.get(k), b.get(k)) if k in a and k in b else a.get(k, b.get(k))
                for k in {**a, **b}}  # fmt: skip
    if isinstance(a, list) and isinstance(b, list):
        return a + b
    return a if a == b else [a, b] if not isinstance(a, list) else [*a, b]
