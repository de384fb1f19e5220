"""``report.html``: the final report as one self-contained page to look at.

Written beside ``report.json`` from the same dict (:func:`write_report_html`), at the end of a
crawl and on ``ctl status --html``. Everything is inline: CSS in a ``<style>``, the charts as
SVG drawn here, no script, no font, no image, nothing loaded from anywhere (the page carries a
``Content-Security-Policy`` that forbids it, so a browser opening it from disk fetches nothing).
Every string that came from the crawl (host names, URLs, error kinds, warnings) is escaped:
they are chosen by the sites crawled.
"""

from __future__ import annotations

import datetime as dt
import html
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from frontier_crawl.figures import count_text, duration_text, rate_text, this_run_text
from frontier_crawl.output.fsync import write_atomic
from frontier_crawl.output.report import how_it_ended, interval_label

#: the chart's drawing area, in SVG user units (it scales to the page width)
_W, _H, _PAD_L, _PAD_B, _PAD_T = 900, 240, 56, 28, 12
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
CHART_TITLE = "Pages per second over the crawl's life"


def write_report_html(path: Path, report: Mapping[str, object]) -> None:
    """Write ``report`` as a self-contained HTML page at ``path``, atomically."""
    text = render_report_html(report)
    write_atomic(path, text)


def _e(value: object) -> str:
    """``value`` as escaped HTML text (quotes too: also safe inside attributes)."""
    return html.escape(str(value), quote=True)


def _num(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _bytes(n: object) -> str:
    if not isinstance(n, int | float):
        return str(n)
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"  # pragma: no cover


def _duration(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return str(seconds)
    s = int(seconds)
    if s < 120:
        return f"{float(seconds):.1f} s"
    h, rem = divmod(s, 3600)
    return f"{h} h {rem // 60} min" if h else f"{rem // 60} min {rem % 60} s"


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _rows(value: object) -> list[Mapping[str, object]]:
    return [r for r in value if isinstance(r, Mapping)] if isinstance(value, list) else []


def write_status_html(status: Mapping[str, object], root: Path) -> Path:
    """``ctl status --html``: ``root/report.html`` from a running crawl's status (``GET
    /api/status``): the same page, its chart the status's last ten minutes. The path."""
    path = root / "report.html"
    write_report_html(path, status_report(status, str(root)))
    return path


#: the width of a bucket of the status's history (samples about every 2 s) in report.html
STATUS_BUCKET_S = 10.0


def status_report(status: Mapping[str, object], output_dir: str) -> dict[str, object]:
    """A report dict (as ``render_report_html`` reads) from a status snapshot."""
    get = status.get
    elapsed = get("elapsed_s", 0.0)
    pages = get("pages", 0)
    rate = pages / elapsed if isinstance(pages, int) and isinstance(elapsed, int | float) \
        and elapsed > 0 else 0.0
    buckets: dict[int, list[float]] = {}
    history = get("history")
    samples = [h for h in history if isinstance(h, list | tuple) and len(h) in (2, 3)] \
        if isinstance(history, list) else []
    for a, b in itertools.pairwise(samples):
        start = int(b[0] - b[0] % STATUS_BUCKET_S)
        slot = buckets.setdefault(start, [0.0, 0.0, 0.0])
        slot[0] += max(0, b[1] - a[1])
        slot[1] += max(0.0, b[0] - a[0])
        slot[2] += max(0, (b[2] if len(b) > 2 else 0) - (a[2] if len(a) > 2 else 0))
    return {
        "title": "frontier-crawl status",
        "chart_title": "Pages per second, last 10 minutes (live status)",
        "chart_empty": "No pages in the status's history yet (with worker processes it has "
                       "none: each worker's report.json has its own series).",
        "state": f"{get('state', '')}: {_mapping(get('bottleneck')).get('name', '')}",
        "bottleneck": _mapping(get("bottleneck")).get("detail", ""),
        "output_dir": output_dir,
        "fetched": pages,
        "pages_per_s": round(rate, 3),
        "pages_per_s_now": get("pages_per_s", 0.0),
        "elapsed_s": elapsed,
        "queued": get("queued", 0),
        "in_flight": get("in_flight", 0),
        "hosts": get("hosts", {}),
        "outcomes": get("outcomes", {}),
        "cpu": get("cpu", {}),
        "rate_bucket_s": STATUS_BUCKET_S,
        "pages_over_time": [[t, int(n), min(ran, STATUS_BUCKET_S), int(rv)]
                            for t, (n, ran, rv) in sorted(buckets.items())],
        "revisits": get("revisits", 0),
        "this_run": get("this_run"),
        "busiest_hosts": get("busiest_hosts", []),
        "failing_hosts": get("failing_hosts", []),
        "blocked_hosts": get("blocked_hosts", []),
        "host_delays": get("host_delays", {}),
        "paused": get("paused", False),
        "freshness": get("freshness", {"enabled": False}),
    }  # fmt: skip


def render_report_html(report: Mapping[str, object]) -> str:
    """The page for ``report`` (a ``report.json`` dict; missing keys show as absent)."""
    get = report.get
    complete = get("complete")
    state = str(get("state")) if get("state") else how_it_ended(report)
    cards = [
        ("pages fetched (all runs)", count_text(get("fetched", 0))),
        ("pages / s (whole crawl)", rate_text(get("pages_per_s", 0.0))),
        ("crawl time (all runs)", duration_text(get("elapsed_s", 0.0))),
        ("downloaded", _bytes(get("bytes", 0))),
        ("hosts held (Retry-After, backoff)", _duration(get("host_held_s", 0.0))),
    ]
    if get("revisits"):
        cards.insert(1, ("revisits (all runs)", count_text(get("revisits"))))
    run = _mapping(get("this_run"))
    elapsed = get("elapsed_s", 0.0)
    ran = run.get("elapsed_s", 0.0)
    if isinstance(elapsed, int | float) and isinstance(ran, int | float) and elapsed - ran >= 0.5:
        cards.append(("this run", this_run_text(dict(run)).removeprefix("this run: ")))
    title = str(get("title", "frontier-crawl report"))
    parts = [
        _head(f"{title}: {get('output_dir', '')}"),
        f"<header><h1>{_e(title)}</h1>",
        f'<p class="sub"><span class="badge {"ok" if complete else "warn"}">{_e(state)}</span>'
        f" {_e(get('output_dir', ''))}</p></header>",
        f'<section class="bottleneck">{_e(get("bottleneck"))}</section>'
        if get("bottleneck") else "",
        '<section class="cards">',
        *(f'<div class="card"><div class="v">{_e(v)}</div><div class="k">{_e(k)}</div></div>'
          for k, v in cards),
        "</section>",
        _warnings(get("warnings"), get("write_error")),
        _freshness(get("freshness")),
        f"<section><h2>{_e(get('chart_title', CHART_TITLE))}</h2>",
        _rate_chart(get("pages_over_time"), get("rate_bucket_s"),
                    str(get("chart_empty", "No page was fetched."))),
        "</section>",
        '<section class="two">',
        _bars("Outcomes", _mapping(get("outcomes")), "outcome"),
        _bars("Errors by kind", _mapping(get("errors_by_kind")), "error"),
        "</section>",
        '<section class="two">',
        _bars("HTTP status classes", _mapping(get("status_classes")), "status"),
        _time_went(report),
        "</section>",
        '<section class="two">',
        _host_table("Slowest hosts (mean fetch time)", _rows(get("slowest_hosts")),
                    ("host", "pages", "mean_fetch_s", "failures")),
        _host_table("Most failing hosts", _rows(get("failing_hosts")),
                    ("host", "failures", "pages", "mean_fetch_s", "held_s")),
        "</section>",
        _host_table("Busiest hosts", _rows(get("busiest_hosts")), ("host", "pages", "queued"))
        if "busiest_hosts" in report else "",
        _host_table("URLs that held their hosts longest (Retry-After, backoff)",
                    _rows(get("held_by")), ("url", "held_s")),
        _details(report),
        "</body></html>\n",
    ]  # fmt: skip
    return "\n".join(p for p in parts if p)


def _head(title: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>
:root {{ --bg:#f6f7f9; --fg:#1d2330; --mute:#6b7280; --card:#fff; --line:#e3e6eb;
        --acc:#2563eb; --bad:#dc2626; --ok:#15803d; --warn:#b45309; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0 auto; max-width: 1100px; padding: 24px; background: var(--bg); color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }}
h1 {{ margin: 0; font-size: 24px; }} h2 {{ font-size: 15px; margin: 0 0 10px; }}
.sub {{ color: var(--mute); margin: 4px 0 18px; word-break: break-all; }}
.badge {{ display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff;
         font-weight: 600; }}
.badge.ok {{ background: var(--ok); }} .badge.warn {{ background: var(--warn); }}
section {{ background: var(--card); border: 1px solid var(--line); border-radius: 8px;
          padding: 14px 16px; margin: 0 0 14px; }}
section.cards, section.two {{ background: none; border: 0; padding: 0; display: grid; gap: 14px; }}
section.cards {{ grid-template-columns: repeat(auto-fit, minmax(160px, 1fr)); }}
.freshness .cards {{ display: grid; gap: 10px;
                    grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); }}
section.two {{ grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); }}
section.two > div {{ background: var(--card); border: 1px solid var(--line); border-radius: 8px;
                    padding: 14px 16px; }}
.card {{ background: var(--card); border: 1px solid var(--line); border-radius: 8px;
        padding: 12px 14px; }}
.card .v {{ font-size: 22px; font-weight: 650; }} .card .k {{ color: var(--mute); }}
table {{ border-collapse: collapse; width: 100%; }}
td, th {{ padding: 3px 6px; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }}
th {{ color: var(--mute); font-weight: 600; }}
td.n {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
td.h {{ word-break: break-all; }}
.bar {{ height: 10px; background: var(--acc); border-radius: 3px; min-width: 1px; }}
.bar.error {{ background: var(--bad); }}
.empty {{ color: var(--mute); }}
.bottleneck {{ border-left: 4px solid var(--acc); font-size: 15px; word-break: break-word; }}
.warnings {{ border-color: #f1c27d; background: #fff8eb; }}
.warnings li {{ word-break: break-word; }}
svg text {{ fill: var(--mute); font-size: 11px; }}
svg .grid {{ stroke: var(--line); }}
svg .line {{ fill: none; stroke: var(--acc); stroke-width: 2; }}
svg .area {{ fill: var(--acc); opacity: .12; }}
svg .line.revisits {{ stroke: #7c3aed; }}
</style></head><body>"""


def _seconds(value: object) -> str:
    """A duration in seconds, or "none" (a figure with nothing to measure is null)."""
    return _duration(value) if isinstance(value, int | float) else "none"


def _freshness(value: object) -> str:
    """The "Freshness" section of a continuous crawl (the report's ``freshness``,
    docs/continuous.md): the schedule's cards, visits by result, the rates per hour, the
    interval distribution. Nothing without recrawl."""
    fresh = _mapping(value)
    if not fresh.get("enabled"):
        return ""
    get = fresh.get
    per_hour = _mapping(get("per_hour"))
    due = _num(get("due_now", 0)) + ("+" if get("due_now_capped") else "")
    cards = [
        ("URLs scheduled", _num(get("scheduled", 0))),
        ("revisits due now", due),
        ("next due in", _seconds(get("next_due_s"))),
        ("overdue p50 (last 5 min)", _seconds(get("overdue_p50_s"))),
        ("overdue p99 (last 5 min)", _seconds(get("overdue_p99_s"))),
        ("changes / hour", _num(per_hour.get("changes", 0.0))),
        ("revisits / hour", _num(per_hour.get("revisits", 0.0))),
        ("new pages / hour", _num(per_hour.get("new_pages", 0.0))),
    ]
    intervals = _mapping(get("intervals"))
    bounds, counts = intervals.get("le_s"), intervals.get("counts")
    buckets: dict[str, object] = {}
    if isinstance(bounds, list) and isinstance(counts, list):
        for i, (bound, n) in enumerate(zip(bounds, counts, strict=False)):
            buckets[interval_label(bound, bounds[i - 1] if i else None)] = n
    return "\n".join([
        '<section class="freshness"><h2>Freshness (continuous crawl)</h2>',
        '<div class="cards">',
        *(f'<div class="card"><div class="v">{_e(v)}</div><div class="k">{_e(k)}</div></div>'
          for k, v in cards),
        "</div></section>",
        '<section class="two">',
        _bars("Visits by result (all runs)", _mapping(get("visits")), "visit"),
        _rows_in_order("Revisit intervals (URLs scheduled)", buckets),
        "</section>",
    ])  # fmt: skip


def _rows_in_order(title: str, counts: Mapping[str, object]) -> str:
    """A bar per key, in the mapping's order (a distribution: empty buckets shown too)."""
    items = [(k, int(v)) for k, v in counts.items() if isinstance(v, int)]
    if not any(v for _, v in items):
        return f'<div><h2>{_e(title)}</h2><p class="empty">none</p></div>'
    top = max(v for _, v in items)
    rows = "".join(
        f'<tr><td>{_e(k)}</td><td class="n">{v:,}</td><td style="width:45%">'
        f'<div class="bar" style="width:{100 * v / top:.1f}%"></div></td></tr>'
        for k, v in items
    )
    return f"<div><h2>{_e(title)}</h2><table>{rows}</table></div>"


def _warnings(warnings: object, write_error: object) -> str:
    items = [str(w) for w in warnings] if isinstance(warnings, list) else []
    if write_error:
        items.insert(0, f"write failed: {write_error}")
    if not items:
        return ""
    lis = "".join(f"<li>{_e(w)}</li>" for w in items)
    return f'<section class="warnings"><h2>Warnings</h2><ul>{lis}</ul></section>'


def _rate_chart(points: object, bucket_s: object, empty: str = "No page was fetched.") -> str:
    """pages/s per bucket as an SVG line (and a continuous crawl's revisits/s, a second
    line); a gap between runs breaks the lines."""
    width = float(bucket_s) if isinstance(bucket_s, int | float) and bucket_s > 0 else 60.0
    series: list[tuple[float, float]] = []
    revisits: list[tuple[float, float]] = []
    if isinstance(points, list):
        for p in points:
            if isinstance(p, list | tuple) and len(p) in (3, 4) and all(
                isinstance(v, int | float) for v in p
            ):
                # divided by the time the crawl ran in the bucket (a second at least)
                ran = max(float(p[2]), min(1.0, width))
                series.append((float(p[0]), float(p[1]) / ran))
                revisits.append((float(p[0]), float(p[3] if len(p) == 4 else 0) / ran))
    if not series:
        return f'<p class="empty">{_e(empty)}</p>'
    series.sort()
    revisits.sort()
    drawn = [series, revisits] if any(r for _, r in revisits) else [series]
    t0, t1 = series[0][0], series[-1][0] + width
    top = _nice_ceiling(max(r for line in drawn for _, r in line))
    plot_w, plot_h = _W - _PAD_L - 8, _H - _PAD_B - _PAD_T

    def x(t: float) -> float:
        return _PAD_L + (t - t0) / (t1 - t0) * plot_w

    def y(rate: float) -> float:
        return _PAD_T + plot_h - rate / top * plot_h

    out = [f'<svg viewBox="0 0 {_W} {_H}" width="100%" role="img" '
           f'aria-label="pages per second over time">']  # fmt: skip
    for i in range(5):
        value = top * i / 4
        yy = y(value)
        out.append(f'<line class="grid" x1="{_PAD_L}" x2="{_W - 8}" y1="{yy:.1f}" y2="{yy:.1f}"/>')
        out.append(f'<text x="{_PAD_L - 6}" y="{yy + 4:.1f}" text-anchor="end">{value:g}</text>')
    for t in _time_ticks(t0, t1):
        out.append(f'<text x="{x(t):.1f}" y="{_H - 8}" text-anchor="middle">'
                   f"{_e(_clock(t, t1 - t0))}</text>")  # fmt: skip
    for kind, line_series in zip(("line", "line revisits"), drawn, strict=False):
        for run in _runs(line_series, width):
            # each bucket drawn as a step across its width, so one bucket is still visible
            pts: list[tuple[float, float]] = []
            for t, rate in run:
                pts += [(x(t), y(rate)), (x(t + width), y(rate))]
            line = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            base = y(0)
            area = f"{pts[0][0]:.1f},{base:.1f} {line} {pts[-1][0]:.1f},{base:.1f}"
            if kind == "line":
                out.append(f'<polygon class="area" points="{area}"/>')
            out.append(f'<polyline class="{kind}" points="{line}"/>')
    out.append("</svg>")
    peak = max(r for _, r in series)
    said = f"peak {peak:.3g} pages/s"
    if len(drawn) > 1:
        said += f", {max(r for _, r in revisits):.3g} revisits/s (the second line)"
    out.append(
        f'<p class="empty">{len(series)} bucket(s) of {_duration(width)}, '
        f"{said}; gaps are times the crawl was not running.</p>"
    )
    return "".join(out)


def _runs(series: Sequence[tuple[float, float]], width: float) -> list[list[tuple[float, float]]]:
    """Split the series where buckets are missing (the crawl was not running)."""
    runs: list[list[tuple[float, float]]] = []
    for t, rate in series:
        if runs and t - runs[-1][-1][0] <= width * 1.5:
            runs[-1].append((t, rate))
        else:
            runs.append([(t, rate)])
    return runs


def _nice_ceiling(value: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    base = 10.0 ** math.floor(math.log10(value))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= value * 0.999999)


def _time_ticks(t0: float, t1: float) -> list[float]:
    span = t1 - t0
    return [t0 + span * i / 5 for i in range(6)]


def _clock(t: float, span: float) -> str:
    """A tick label in UTC: the time of day (seconds for a short span, the date for a long one)."""
    stamp = dt.datetime.fromtimestamp(t, tz=dt.UTC)
    fmt = "%m-%d %H:%M" if span > 86_400 else "%H:%M" if span > 600 else "%H:%M:%S"
    return stamp.strftime(fmt)


def _bars(title: str, counts: Mapping[str, object], kind: str) -> str:
    items = [(str(k), int(v)) for k, v in counts.items() if isinstance(v, int) and v > 0]
    items.sort(key=lambda kv: -kv[1])
    if not items:
        return f'<div><h2>{_e(title)}</h2><p class="empty">none</p></div>'
    top = items[0][1]
    rows = "".join(
        f'<tr><td class="h">{_e(k)}</td><td class="n">{v:,}</td>'
        f'<td style="width:45%"><div class="bar {"error" if kind == "error" else ""}" '
        f'style="width:{100 * v / top:.1f}%"></div></td></tr>'
        for k, v in items
    )
    return f'<div><h2>{_e(title)}</h2><table>{rows}</table></div>'


#: the loop's phases (report ``loop_s``) as report.html names them
_PHASES = (
    ("waiting", "waiting (politeness delays, the network)"),
    ("parse", "parsing links"),
    ("callbacks", "spider callbacks"),
    ("warc", "WARC records"),
    ("frontier", "frontier (scheduling, LMDB commits)"),
    ("fetch", "fetch (libcurl, results)"),
)


def _time_went(report: Mapping[str, object]) -> str:
    """Where time went: the loop's seconds by phase over the crawl's life (``loop_s``), else
    the CPU shares the status measured last (``cpu``), else the waits."""
    loop = {k: float(v) for k, v in _mapping(report.get("loop_s")).items()
            if isinstance(v, int | float)}  # fmt: skip
    run = loop.get("run", 0.0)
    if run > 0:
        rows = [(label, loop.get(key, 0.0)) for key, label in _PHASES]
        rows.append(("other work", max(0.0, run - sum(v for _, v in rows))))
        body = "".join(
            f'<tr><td>{_e(label)}</td><td class="n">{_e(_duration(v))}</td>'
            f'<td class="n">{100 * v / run:.1f}%</td><td style="width:35%"><div class="bar" '
            f'style="width:{min(100.0, 100 * v / run):.1f}%"></div></td></tr>'
            for label, v in rows
        )
        return (f"<div><h2>Where time went (the crawl loop, {_e(_duration(run))} in all)</h2>"
                f"<table>{body}</table></div>")  # fmt: skip
    cpu = _mapping(report.get("cpu"))
    shares = _mapping(cpu.get("shares"))
    if shares:
        busy = cpu.get("loop_busy")
        title = "Where time went (share of the loop's CPU time)"
        note = (f'<p class="empty">loop busy {float(busy) * 100:.0f}% of the time</p>'
                if isinstance(busy, int | float) else "")  # fmt: skip
        items = [(str(k), float(v)) for k, v in shares.items() if isinstance(v, int | float)]
        items.sort(key=lambda kv: -kv[1])
        body = "".join(
            f'<tr><td>{_e(k)}</td><td class="n">{v * 100:.1f}%</td>'
            f'<td style="width:45%"><div class="bar" style="width:{v * 100:.1f}%"></div></td></tr>'
            for k, v in items
        )
        return f"<div><h2>{_e(title)}</h2><table>{body}</table>{note}</div>"
    elapsed = report.get("elapsed_s", 0.0)
    waits = {
        "crawl time": _duration(elapsed),
        "hosts held (Retry-After, backoff)": _duration(report.get("host_held_s", 0.0)),
        "paused for disk space": _duration(report.get("disk_space_paused_s", 0.0)),
    }
    body = "".join(f'<tr><td>{_e(k)}</td><td class="n">{_e(v)}</td></tr>' for k, v in waits.items())
    return f"<div><h2>Where time went</h2><table>{body}</table></div>"


def _host_table(title: str, rows: Iterable[Mapping[str, object]], cols: Sequence[str]) -> str:
    rows = list(rows)
    if not rows:
        return f'<section><h2>{_e(title)}</h2><p class="empty">none</p></section>'
    cols = [c for c in cols if any(c in r for r in rows)]  # the columns these rows have
    head = "".join(f"<th>{_e(c.replace('_', ' '))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="{"h" if c in ("host", "url") else "n"}">{_e(_num(r.get(c, "")))}</td>'
            for c in cols
        ) + "</tr>"
        for r in rows
    )  # fmt: skip
    return f"<section><h2>{_e(title)}</h2><table><tr>{head}</tr>{body}</table></section>"


def _details(report: Mapping[str, object]) -> str:
    """Every other scalar of the report, for completeness."""
    shown = {"fetched", "pages_per_s", "elapsed_s", "bytes", "host_held_s", "warnings",
             "output_dir", "outcomes", "errors_by_kind", "status_classes", "slowest_hosts",
             "failing_hosts", "held_by", "pages_over_time", "rate_bucket_s", "cpu", "title",
             "chart_title", "chart_empty", "state", "bottleneck", "busiest_hosts",
             "loop_s", "freshness", "revisits", "this_run"}  # fmt: skip
    rows = []
    for key, value in report.items():
        if key in shown:
            continue
        if isinstance(value, Mapping):
            value = ", ".join(f"{k} {_num(v)}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(str(v) for v in value) or "none"
        elif value is None:
            value = "none"
        else:
            value = _num(value)
        rows.append(f'<tr><td>{_e(key.replace("_", " "))}</td><td class="h">{_e(value)}</td></tr>')
    return f"<section><h2>All figures</h2><table>{''.join(rows)}</table></section>"
