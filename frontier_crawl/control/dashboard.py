"""The dashboard served at ``GET /``: one self-contained page, inline CSS and script.

Nothing is loaded from anywhere but the control listener itself: its Content-Security-Policy
(in a ``<meta>`` of the page, and as a header from the server, :func:`content_security_policy`)
allows only the page's own ``<style>`` and ``<script>``, by their SHA-256 hashes computed from
the bytes served, and ``fetch`` to the same origin; no ``'unsafe-inline'``, so even markup that
got into the page could run no script and set no inline style (the page itself has no
``style=`` attribute; its script sets styles through the CSSOM, which a CSP allows),
so it works on a machine without internet access and leaks nothing. It polls
``GET /api/status`` every second and draws what it gets: the state and the bottleneck line,
pages, pages/s over the last ten minutes (an SVG chart of ``history``), queued URLs, hosts by
state, outcomes, the busiest and the most failing hosts, the CPU shares, one row per worker
process; on a cluster node, the whole cluster (the status's ``cluster``: one row per node with
its state, pages, pages/s, queued, bottleneck and when it was last heard of; the nodes missing,
never joined or silent, and for how long; the totals); in a continuous crawl (the status's
``freshness`` with ``enabled``, docs/continuous.md) a freshness panel: URLs scheduled, revisits
due now, the next due, how late revisits start (p50, p99), changes, revisits and new pages per hour,
visits by result and the revisit-interval distribution; and it has pause and resume buttons
(``POST /api/pause|resume``, this node's).

The token. Opened as ``http://127.0.0.1:PORT/?token=T`` (what ``frontier-crawl ctl dashboard``
prints), the script takes the token from the address, removes it from the address bar and
history (``history.replaceState``), keeps it in ``sessionStorage`` (this tab only, so a reload
still works) and sends it as ``Authorization: Bearer`` on every request.

Host names, URLs, bottleneck sentences and outcome names come from the crawl, so from the sites
crawled: the script writes them only as text (``textContent``, ``createTextNode``, SVG
attributes set one by one), never as markup (no ``innerHTML``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from typing import Final

#: how often the page asks for the status, in milliseconds
POLL_MS: Final = 1000

_PAGE: Final = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="__CSP__">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>frontier-crawl</title>
<style>
:root { --bg:#0f141b; --panel:#171e28; --line:#263140; --fg:#e6ebf2; --mute:#8b97a8;
        --acc:#4f9cff; --ok:#3fb950; --warn:#d29922; --bad:#f85149; --vio:#a371f7; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 18px 20px 30px; }
header { display: flex; align-items: center; gap: 14px; flex-wrap: wrap; margin-bottom: 14px; }
h1 { font-size: 20px; margin: 0; letter-spacing: .2px; }
h2 { font-size: 13px; margin: 0 0 10px; color: var(--mute); font-weight: 600;
     text-transform: uppercase; letter-spacing: .6px; }
.badge { padding: 2px 10px; border-radius: 12px; font-weight: 650; font-size: 13px;
         background: var(--line); }
.badge.running { background: #12361f; color: var(--ok); }
.badge.paused { background: #3a2c0b; color: var(--warn); }
.badge.stopping, .badge.finished { background: #2a2140; color: var(--vio); }
.spacer { flex: 1; }
button { font: inherit; font-weight: 600; border: 1px solid var(--line); color: var(--fg);
         background: var(--panel); padding: 6px 16px; border-radius: 6px; cursor: pointer; }
button:hover { border-color: var(--acc); }
button:disabled { opacity: .45; cursor: default; }
button.primary { background: var(--acc); border-color: var(--acc); color: #06101f; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
         padding: 14px 16px; }
#bottleneck { display: flex; gap: 14px; align-items: baseline; margin-bottom: 14px;
              border-left: 4px solid var(--acc); }
#bottleneck-name { font-weight: 700; font-size: 16px; text-transform: uppercase;
                   letter-spacing: .5px; color: var(--acc); white-space: nowrap; }
#bottleneck[data-name=backoff], #bottleneck[data-name=cpu] { border-left-color: var(--bad); }
#bottleneck[data-name=backoff] #bottleneck-name, #bottleneck[data-name=cpu] #bottleneck-name
  { color: var(--bad); }
#bottleneck[data-name=paused], #bottleneck[data-name=draining] { border-left-color: var(--warn); }
#bottleneck[data-name=paused] #bottleneck-name, #bottleneck[data-name=draining] #bottleneck-name
  { color: var(--warn); }
#bottleneck-detail { font-size: 15px; word-break: break-word; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px;
         margin-bottom: 14px; }
.card .v { font-size: 24px; font-weight: 700; font-variant-numeric: tabular-nums; }
.card .k { color: var(--mute); font-size: 12px; }
.gap { margin-bottom: 14px; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(360px, 1fr)); gap: 14px;
         margin-bottom: 14px; }
#chart { width: 100%; height: 220px; display: block; }
#chart text { fill: var(--mute); font-size: 11px; }
#chart .gl { stroke: var(--line); }
#chart .ln { fill: none; stroke: var(--acc); stroke-width: 2; }
#chart .ar { fill: var(--acc); opacity: .15; }
#chart .ln2 { fill: none; stroke: var(--vio); stroke-width: 2; }
#chart-legend { text-transform: none; letter-spacing: 0; color: var(--vio); margin-left: 10px; }
table { border-collapse: collapse; width: 100%; }
td, th { padding: 4px 6px; border-bottom: 1px solid var(--line); text-align: left; }
th { color: var(--mute); font-weight: 600; font-size: 12px; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.h { word-break: break-all; }
.bar { height: 8px; border-radius: 3px; background: var(--acc); min-width: 1px; }
.bar.bad { background: var(--bad); }
.stack { display: flex; height: 14px; border-radius: 4px; overflow: hidden;
         background: var(--line); margin: 4px 0 10px; }
.stack div { height: 100%; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; }
.legend span::before { content: ""; display: inline-block; width: 10px; height: 10px;
                       border-radius: 2px; margin-right: 6px; background: var(--c); }
.empty { color: var(--mute); }
#message { color: var(--mute); font-size: 12px; margin-top: 10px; }
.missing { color: var(--warn); margin: 6px 0; }
tr.missing td { color: var(--warn); }
#message.error { color: var(--bad); }
.grid2.flat { margin-bottom: 0; }
#freshness-panel .card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
</style></head>
<body><main>
<header>
  <h1>frontier-crawl</h1><span id="state" class="badge">connecting</span>
  <span id="elapsed" class="empty"></span><span class="spacer"></span>
  <button id="pause" type="button">Pause</button>
  <button id="resume" type="button" class="primary">Resume</button>
</header>
<div id="bottleneck" class="panel"><span id="bottleneck-name">&hellip;</span>
  <span id="bottleneck-detail" class="empty">waiting for the first status</span></div>
<div class="cards">
  <div class="card panel"><div class="v" id="pages">-</div><div class="k">pages fetched</div></div>
  <div class="card panel"><div class="v" id="rate">-</div>
    <div class="k">pages / s (10 s)</div></div>
  <div class="card panel"><div class="v" id="queued">-</div>
    <div class="k" id="queued-split">queued URLs</div></div>
  <div class="card panel"><div class="v" id="in-flight">-</div>
    <div class="k" id="concurrency">in flight</div></div>
  <div class="card panel"><div class="v" id="hosts-total">-</div>
    <div class="k">hosts with URLs queued or in flight</div></div>
  <div class="card panel" id="revisits-card" hidden><div class="v" id="revisits">-</div>
    <div class="k" id="revisits-rate">revisits (all runs)</div></div>
</div>
<div class="panel gap"><h2>Pages per second (10 s window), last 10 min<span id="chart-legend">
  </span></h2>
  <svg id="chart" viewBox="0 0 1000 220" preserveAspectRatio="none" role="img"
       aria-label="pages per second over the last ten minutes"></svg></div>
<div class="panel gap" id="freshness-panel" hidden><h2>Freshness (continuous crawl)</h2>
  <div class="cards">
    <div class="card"><div class="v" id="fresh-scheduled">-</div>
      <div class="k">URLs scheduled</div></div>
    <div class="card"><div class="v" id="fresh-due">-</div>
      <div class="k">revisits due now</div></div>
    <div class="card"><div class="v" id="fresh-next">-</div><div class="k">next due in</div></div>
    <div class="card"><div class="v" id="fresh-p50">-</div>
      <div class="k">overdue p50 (5 min)</div></div>
    <div class="card"><div class="v" id="fresh-p99">-</div>
      <div class="k">overdue p99 (5 min)</div></div>
    <div class="card"><div class="v" id="fresh-changes">-</div>
      <div class="k">changes / h</div></div>
    <div class="card"><div class="v" id="fresh-revisits">-</div>
      <div class="k">revisits / h</div></div>
    <div class="card"><div class="v" id="fresh-new">-</div><div class="k">new pages / h</div></div>
  </div>
  <div class="grid2 flat">
    <div><h2>Visits by result</h2><table id="fresh-visits"></table></div>
    <div><h2>Revisit intervals (URLs)</h2><table id="fresh-intervals"></table></div>
  </div></div>
<div class="grid2">
  <div class="panel"><h2>Hosts by state</h2><div id="hosts-stack" class="stack"></div>
    <div id="hosts-legend" class="legend"></div></div>
  <div class="panel"><h2>Where the loop's time goes</h2><table id="cpu"></table></div>
</div>
<div class="grid2">
  <div class="panel"><h2>Outcomes</h2><table id="outcomes"></table></div>
  <div class="panel"><h2>Operator settings</h2><table id="operator"></table></div>
</div>
<div class="grid2">
  <div class="panel"><h2>Busiest hosts</h2><table id="busiest"></table></div>
  <div class="panel"><h2>Most failing hosts</h2><table id="failing"></table></div>
</div>
<div class="panel gap" id="cluster-panel" hidden><h2>Cluster</h2>
  <div id="cluster-summary"></div><div id="cluster-waiting" class="missing"></div>
  <table id="cluster"></table></div>
<div class="panel" id="workers-panel" hidden><h2>Worker processes</h2>
  <table id="workers"></table></div>
<div id="message"></div>
</main>
<script>
"use strict";
const POLL_MS = __POLL_MS__;
const HOST_COLORS = {ready: "#3fb950", waiting: "#4f9cff", backoff: "#f85149",
                     robots: "#a371f7", blocked: "#d29922"};
const $ = (id) => document.getElementById(id);

const token = (() => {
  const url = new URL(window.location.href);
  const given = url.searchParams.get("token");
  if (given !== null) {
    sessionStorage.setItem("frontier-crawl-token", given);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem("frontier-crawl-token") || "";
})();

function api(method, path) {
  return fetch(path, {method, cache: "no-store", credentials: "omit",
                      headers: {"Authorization": "Bearer " + token}});
}

const fmt = new Intl.NumberFormat("en-US");
function num(v) { return typeof v === "number" && isFinite(v) ? fmt.format(v) : "-"; }
function rate(v) {
  if (typeof v !== "number" || !isFinite(v)) return "-";
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}
function secs(s) {
  if (typeof s !== "number" || !isFinite(s)) return "";
  s = Math.floor(s);
  const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), r = s % 60;
  return h ? h + " h " + m + " min" : m ? m + " min " + r + " s" : r + " s";
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells) {
  const tr = el("tr");
  for (const [text, cls] of cells) tr.appendChild(el("td", text, cls));
  return tr;
}
function head(names) {
  const tr = el("tr");
  for (const [text, cls] of names) tr.appendChild(el("th", text, cls));
  return tr;
}
function barCell(value, top, bad) {
  const td = el("td");
  td.style.width = "40%";
  const bar = el("div", null, bad ? "bar bad" : "bar");
  bar.style.width = (top > 0 ? Math.max(0.5, 100 * value / top) : 0).toFixed(1) + "%";
  td.appendChild(bar);
  return td;
}
function fill(table, rows, empty) {
  table.replaceChildren(...rows);
  if (rows.length === 0 || (rows.length === 1 && rows[0].firstChild.tagName === "TH")) {
    table.replaceChildren(row([[empty, "empty"]]));
  }
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}
function ago(s) {
  return s <= 0 ? "now" : s < 120 ? "-" + Math.round(s) + " s" : "-" + Math.round(s / 60) + " min";
}
function drawChart(history, continuous) {
  // pages/s (and a continuous crawl's revisits/s: the points' third figure) over a sliding
  // window of SMOOTH_S (samples come about every 2 s), on an axis as long as the history (one
  // minute at least, ten at most)
  const SMOOTH_S = 10;
  const chart = $("chart");
  const W = 1000, H = 220, L = 48, B = 22, T = 8;
  const pts = [], rev = [];
  let j = 0;
  for (let i = 1; i < history.length; i++) {
    while (j < i - 1 && history[i][0] - history[j + 1][0] >= SMOOTH_S) j++;
    const [t0, p0] = history[j], [t1, p1] = history[i];
    if (t1 > t0) {
      pts.push([t1, Math.max(0, (p1 - p0) / (t1 - t0))]);
      rev.push([t1, Math.max(0, ((history[i][2] || 0) - (history[j][2] || 0)) / (t1 - t0))]);
    }
  }
  $("chart-legend").textContent = continuous ? "\u2014 revisits / s" : "";
  const nodes = [];
  const now = history.length ? history[history.length - 1][0] : Date.now() / 1000;
  const first = history.length ? history[0][0] : now;
  const span = Math.min(600, Math.max(60, now - first));
  const start = now - span;
  let top = 1;
  for (const [, r] of pts) top = Math.max(top, r);
  if (continuous) for (const [, r] of rev) top = Math.max(top, r);
  const mag = Math.pow(10, Math.floor(Math.log10(top)));
  top = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= top * 0.999999);
  const x = (t) => L + (t - start) / span * (W - L - 30);
  const y = (r) => T + (H - B - T) * (1 - r / top);
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    nodes.push(svg("line", {class: "gl", x1: L, x2: W - 30, y1: y(v), y2: y(v)}));
    nodes.push(svg("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, +v.toPrecision(3)));
  }
  for (let k = 0; k <= 5; k++) {
    const t = start + span * k / 5;
    nodes.push(svg("text", {x: x(t), y: H - 6, "text-anchor": "middle"}, ago(now - t)));
  }
  const shown = pts.filter(([t]) => t >= start);
  if (shown.length > 1) {
    const line = shown.map(([t, r]) => x(t).toFixed(1) + "," + y(r).toFixed(1)).join(" ");
    const a = x(shown[0][0]).toFixed(1), b = x(shown[shown.length - 1][0]).toFixed(1);
    nodes.push(svg("polygon", {class: "ar", points: a + "," + y(0) + " " + line + " " +
                                                   b + "," + y(0)}));
    nodes.push(svg("polyline", {class: "ln", points: line}));
    if (continuous) {
      const second = rev.filter(([t]) => t >= start)
        .map(([t, r]) => x(t).toFixed(1) + "," + y(r).toFixed(1)).join(" ");
      nodes.push(svg("polyline", {class: "ln2", points: second}));
    }
  }
  chart.replaceChildren(...nodes);
}

function drawHosts(hosts) {
  const total = hosts.total || 0;
  $("hosts-total").textContent = num(total);
  const stack = [], legend = [];
  for (const [name, color] of Object.entries(HOST_COLORS)) {
    const n = hosts[name] || 0;
    if (total > 0 && n > 0) {
      const part = el("div");
      part.style.width = (100 * n / total) + "%";
      part.style.background = color;
      part.title = name + " " + n;
      stack.push(part);
    }
    const item = el("span", name + " " + num(n));
    item.style.setProperty("--c", color);
    item.dataset.state = name;
    legend.push(item);
  }
  $("hosts-stack").replaceChildren(...stack);
  $("hosts-legend").replaceChildren(...legend);
}

function drawOutcomes(outcomes) {
  const items = Object.entries(outcomes || {}).filter(([, n]) => n > 0);
  items.sort((a, b) => b[1] - a[1]);
  const top = items.length ? items[0][1] : 0;
  const bad = new Set(["failed", "http-error", "too-many-redirects", "robots-unavailable",
                       "address-refused"]);
  fill($("outcomes"), items.map(([name, n]) => {
    const tr = row([[name, "h"], [num(n), "n"]]);
    tr.appendChild(barCell(n, top, bad.has(name)));
    return tr;
  }), "none yet");
}

function drawHostTable(id, rows, columns, empty) {
  const table = $(id);
  const out = [head(columns.map(([label, , cls]) => [label, cls]))];
  for (const r of rows || []) {
    out.push(row(columns.map(([, key, cls, f]) => [f ? f(r[key]) : r[key], cls])));
  }
  fill(table, out, empty);
}

function drawCpu(cpu) {
  const shares = Object.entries((cpu && cpu.shares) || {});
  shares.sort((a, b) => b[1] - a[1]);
  const rows = [row([["loop busy", ""], [Math.round(100 * (cpu.loop_busy || 0)) + "%", "n"]])];
  rows[0].appendChild(barCell(cpu.loop_busy || 0, 1, (cpu.loop_busy || 0) > 0.85));
  for (const [name, v] of shares) {
    const tr = row([[name, ""], [(100 * v).toFixed(1) + "%", "n"]]);
    tr.appendChild(barCell(v, 1, false));
    rows.push(tr);
  }
  fill($("cpu"), rows, "no data");
}

function drawOperator(s) {
  const rows = [row([["paused by the operator", ""], [s.paused ? "yes" : "no", "n"]])];
  for (const host of s.blocked_hosts || []) rows.push(row([["blocked", ""], [host, "h"]]));
  for (const [host, d] of Object.entries(s.host_delays || {})) {
    rows.push(row([["delay " + d + " s", ""], [host, "h"]]));
  }
  fill($("operator"), rows, "none");
}

function line(b) {
  if (!b || !b.name) return "";
  return b.detail ? b.name + ": " + b.detail : b.name;
}
function drawWorkers(workers) {
  $("workers-panel").hidden = !workers || workers.length === 0;
  if (!workers || workers.length === 0) return;
  const cols = [["#", "", "n"], ["state", "state", ""], ["bottleneck", "", ""],
                ["pages", "pages", "n"], ["pages/s", "pages_per_s", "n"],
                ["queued", "queued", "n"], ["in flight", "in_flight", "n"]];
  const out = [head(cols.map(([label, , cls]) => [label, cls]))];
  workers.forEach((w, i) => {
    out.push(row([[i, "n"], [w.state, ""],
                  [line(w.bottleneck), "h"],
                  [num(w.pages), "n"], [rate(w.pages_per_s), "n"], [num(w.queued), "n"],
                  [num(w.in_flight), "n"]]));
  });
  $("workers").replaceChildren(...out);
}

function drawCluster(c) {
  $("cluster-panel").hidden = !c;
  if (!c) return;
  const t = c.totals || {};
  const rows = c.nodes || [];
  $("cluster-summary").textContent = rows.length === 0
    ? c.count + " nodes: not read from Redis yet"
    : c.count + " nodes, " + (c.alive || []).length + " alive" +
      ((c.missing || []).length ? ", " + c.missing.length + " missing" : "") +
      (c.ended ? " (the crawl is over)" : "") + "; pages " + num(t.pages) + " (" +
      rate(t.pages_per_s) + "/s), queued " + num(t.queued) + "; this is node " + c.me;
  $("cluster-waiting").textContent = c.waiting || "";
  const cols = [["node", "n"], ["state", ""], ["pages", "n"], ["pages/s", "n"],
                ["queued", "n"], ["in flight", "n"], ["heard", "n"], ["bottleneck", ""]];
  const out = [head(cols)];
  for (const r of rows) {
    const state = r.for_s === null || r.for_s === undefined ? r.state
                                                            : r.state + " " + secs(r.for_s);
    const tr = row([[r.node, "n"], [state, ""], [num(r.pages), "n"], [rate(r.pages_per_s), "n"],
                    [num(r.queued), "n"], [num(r.in_flight), "n"],
                    [r.heard_s === null ? "never" : secs(r.heard_s) + " ago", "n"],
                    [line(r.bottleneck), "h"]]);
    if (r.missing) tr.className = "missing";
    tr.dataset.node = String(r.node);
    tr.dataset.state = String(r.state);
    out.push(tr);
  }
  $("cluster").replaceChildren(...out);
}

function span(s) {
  // an interval bound in its largest whole unit: 60 -> "1 min", 86400 -> "1 d"
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["min", 60]]) {
    if (s >= size && s % size === 0) return (s / size) + " " + unit;
  }
  return s + " s";
}
function late(v) {
  if (typeof v !== "number" || !isFinite(v)) return "none";
  return v < 10 ? v.toFixed(1) + " s" : secs(v);
}
function drawFreshness(f) {
  const on = !!(f && f.enabled);
  $("freshness-panel").hidden = !on;
  if (!on) return;
  const perHour = f.per_hour || {};
  $("fresh-scheduled").textContent = num(f.scheduled);
  $("fresh-due").textContent = num(f.due_now) + (f.due_now_capped ? "+" : "");
  $("fresh-next").textContent = late(f.next_due_s);
  $("fresh-p50").textContent = late(f.overdue_p50_s);
  $("fresh-p99").textContent = late(f.overdue_p99_s);
  $("fresh-changes").textContent = rate(perHour.changes);
  $("fresh-revisits").textContent = rate(perHour.revisits);
  $("fresh-new").textContent = rate(perHour.new_pages);
  const visits = Object.entries(f.visits || {});
  const top = Math.max(0, ...visits.map(([, n]) => n));
  fill($("fresh-visits"), visits.map(([name, n]) => {
    const tr = row([[name.replace("_", "-"), "h"], [num(n), "n"]]);
    tr.appendChild(barCell(n, top, name === "failed" || name === "gone"));
    return tr;
  }), "none yet");
  const iv = f.intervals || {};
  const bounds = iv.le_s || [], counts = iv.counts || [];
  const most = Math.max(0, ...counts);
  const rows = [];
  counts.forEach((n, i) => {
    const b = bounds[i];
    const label = typeof b === "number" ? "\u2264 " + span(b)
                : i > 0 ? "> " + span(bounds[i - 1]) : "longer";
    const tr = row([[label, ""], [num(n), "n"]]);
    tr.appendChild(barCell(n, most, false));
    rows.push(tr);
  });
  fill($("fresh-intervals"), most > 0 ? rows : [], "none scheduled");
}

let last = null;
// [unix s, pages, revisits] seen by this page, for a status without history
const seen = [];
function draw(s) {
  last = s;
  const now = Date.now() / 1000;
  if (typeof s.pages === "number" && (!seen.length || now - seen[seen.length - 1][0] >= 1)) {
    seen.push([now, s.pages, s.revisits || 0]);
    while (seen.length && now - seen[0][0] > 600) seen.shift();
  }
  const state = $("state");
  state.textContent = s.state;
  state.className = "badge " + s.state;
  const run = s.this_run || {};
  $("elapsed").textContent = secs(s.elapsed_s) + " elapsed (all runs)" +
    (typeof run.elapsed_s === "number" && s.elapsed_s - run.elapsed_s >= 0.5
      ? "; this run: " + num(run.pages) + " pages in " + secs(run.elapsed_s) : "");
  const continuous = !!(s.freshness && s.freshness.enabled);
  $("revisits-card").hidden = !continuous;
  $("revisits").textContent = num(s.revisits);
  $("revisits-rate").textContent = "revisits, all runs (" + rate(s.revisits_per_s) + " / s now)";
  const b = s.bottleneck || {};
  $("bottleneck").dataset.name = b.name || "";
  $("bottleneck-name").textContent = b.name || "";
  $("bottleneck-detail").textContent = b.detail || "";
  $("bottleneck-detail").className = "";
  $("pages").textContent = num(s.pages);
  $("rate").textContent = rate(s.pages_per_s);
  $("queued").textContent = num(s.queued);
  $("queued-split").textContent = "queued: " + num(s.queued_memory) + " in memory, " +
                                  num(s.queued_disk) + " on disk";
  $("in-flight").textContent = num(s.in_flight);
  $("concurrency").textContent = "in flight of " + num(s.concurrency) + " slots";
  drawChart(s.history && s.history.length > 1 ? s.history : seen, continuous);
  drawHosts(s.hosts || {});
  drawOutcomes(s.outcomes);
  drawCpu(s.cpu || {});
  drawOperator(s);
  drawHostTable("busiest", s.busiest_hosts,
                [["host", "host", "h"], ["pages", "pages", "n", num],
                 ["queued", "queued", "n", num]], "none yet");
  drawHostTable("failing", s.failing_hosts,
                [["host", "host", "h"], ["failures", "failures", "n", num],
                 ["held", "held_s", "n", secs]], "none");
  drawWorkers(s.workers);
  drawCluster(s.cluster);
  drawFreshness(s.freshness);
  const over = s.state === "finished";
  $("pause").disabled = over || s.paused;
  $("resume").disabled = over || !s.paused;
  document.body.dataset.pages = String(s.pages);
  document.body.dataset.updated = String(Date.now());
}

function say(text, error) {
  const m = $("message");
  m.textContent = text;
  m.className = error ? "error" : "";
}

async function poll() {
  try {
    const r = await api("GET", "/api/status");
    if (r.status === 401) {
      say("not authorised: open the address frontier-crawl ctl dashboard prints", true);
    } else if (!r.ok) {
      say("status: HTTP " + r.status, true);
    } else {
      draw(await r.json());
      say("updated " + new Date().toLocaleTimeString(), false);
    }
  } catch (e) {
    say("the crawl is not answering (" + e + "); it may have finished", true);
    if (last && last.state !== "finished") $("state").textContent = "unreachable";
  }
  setTimeout(poll, POLL_MS);
}

async function command(path, button) {
  button.disabled = true;
  try {
    const r = await api("POST", path);
    if (!r.ok) say(path + ": HTTP " + r.status, true);
  } catch (e) {
    say(path + ": " + e, true);
  }
  try {
    const r = await api("GET", "/api/status");
    if (r.ok) draw(await r.json());
  } catch (e) { /* the next poll says so */ }
}

$("pause").addEventListener("click", () => command("/api/pause", $("pause")));
$("resume").addEventListener("click", () => command("/api/resume", $("resume")));
poll();
</script>
</body></html>
"""


_INLINE: Final = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.S) for tag in ("script", "style")}


def content_security_policy(page: str, frame_ancestors: bool = False) -> str:
    """The policy for ``page``: nothing but its own inline ``<script>`` and ``<style>``
    elements (allowed by the SHA-256 of their text as served, UTF-8) and ``fetch`` to the same
    origin. ``frame_ancestors``: also no framing (a header only: a ``<meta>`` cannot say it)."""
    sources = {}
    for tag, pattern in _INLINE.items():
        hashes = [base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
                  for text in pattern.findall(page)]  # fmt: skip
        sources[tag] = " ".join(f"'sha256-{h}'" for h in hashes) or "'none'"
    policy = (f"default-src 'none'; script-src {sources['script']}; style-src "
              f"{sources['style']}; connect-src 'self'; img-src data:; base-uri 'none'; "
              "form-action 'none'")  # fmt: skip
    return policy + ("; frame-ancestors 'none'" if frame_ancestors else "")


@functools.cache
def dashboard_html() -> str:
    """The dashboard page (the same bytes every time: it holds no crawl data)."""
    page = _PAGE.replace("__POLL_MS__", str(POLL_MS))
    return page.replace("__CSP__", content_security_policy(page), 1)
