"""``frontier-crawl ctl --config crawl.toml ACTION``: talk to a running crawl's control API.

It finds the crawl from its config: ``output_dir/control.addr`` (the address the API bound)
and ``output_dir/control.token`` (the bearer token, readable by the crawl's user only), both
written when the crawl starts with ``[control] listen`` set and removed when it ends. In a
cluster, ``--node N`` names the node of this machine (``{node}`` in ``output_dir``); any
node's status shows the whole cluster (``cluster``).

Exit status: 0 done; 1 the crawl refused the command or answered with an error (a reload that
was refused, a bad host name...); 2 bad usage or configuration (as the crawler's own); 3 the
crawl cannot be reached: the API is off in the config, the crawl is not running, or the address
file is stale.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from frontier_crawl.config import ConfigError, CrawlSettings, load
from frontier_crawl.control.server import ADDR_FILE, TOKEN_FILE
from frontier_crawl.figures import count_text, duration_text, rate_text, this_run_text

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
SEEDS_PER_REQUEST = 10_000
TIMEOUT_S = 30.0

ACTIONS = ("status", "pause", "resume", "stop", "add-seeds", "block", "unblock", "delay",
           "concurrency", "reload", "dashboard")  # fmt: skip


class CtlError(Exception):
    """A message for the operator and the exit status that goes with it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Client:
    """The control API of the crawl a config describes."""

    def __init__(self, settings: CrawlSettings, node: int | None = None) -> None:
        root = Path(node_output_dir(settings, node))
        if not settings.control.listen:
            raise CtlError(
                "the control API is off for this crawl: set [control] listen (e.g. "
                '"127.0.0.1:8740") in its crawl.toml and start the crawl again',
                EXIT_UNREACHABLE,
            )
        try:
            address = (root / ADDR_FILE).read_text(encoding="ascii")
            self.token = (root / TOKEN_FILE).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            raise CtlError(f"the crawl in {root} is not running (no {ADDR_FILE} there)",
                           EXIT_UNREACHABLE) from None  # fmt: skip
        except (OSError, UnicodeDecodeError) as exc:
            raise CtlError(f"cannot read the crawl's {ADDR_FILE} or {TOKEN_FILE}: {exc}",
                           EXIT_UNREACHABLE) from None  # fmt: skip
        self.address = address.strip()
        self._host, self._port = _address(self.address, root)

    def request(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else b""
        conn = http.client.HTTPConnection(self._host, self._port, timeout=TIMEOUT_S)
        try:
            conn.request(method, path, body=data or None, headers={
                "Authorization": f"Bearer {self.token}", "Host": self.address,
                "Content-Type": "application/json", "Content-Length": str(len(data)),
            })  # fmt: skip
            response = conn.getresponse()
            raw = response.read()
        except ConnectionRefusedError:
            raise CtlError(
                f"the crawl is not running (nothing listens on {self.address}; its "
                f"{ADDR_FILE} is left from a run that did not end normally)",
                EXIT_UNREACHABLE,
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise CtlError(f"the crawl at {self.address} did not answer: {exc}",
                           EXIT_UNREACHABLE) from None  # fmt: skip
        finally:
            conn.close()
        try:
            reply = json.loads(raw) if raw else {}
        except ValueError:
            reply = {"error": raw.decode("utf-8", "replace")[:200]}
        if response.status == 401:
            raise CtlError(f"the crawl refused the token in {TOKEN_FILE} (another run's?)",
                           EXIT_UNREACHABLE)  # fmt: skip
        if response.status != 200 or "error" in reply:
            raise CtlError(str(reply.get("error", f"HTTP {response.status}")), EXIT_REFUSED)
        return dict(reply)


def node_output_dir(settings: CrawlSettings, node: int | None) -> str:
    """``crawl.output_dir``, with ``{node}`` replaced in a cluster (``--node`` required)."""
    out = settings.crawl.output_dir
    if not settings.cluster.redis_url or "{node}" not in out:
        return out
    if node is None:
        raise CtlError(f"crawl.output_dir {out!r} names each node's directory: give --node N "
                       f"(0 .. {settings.cluster.nodes - 1})", EXIT_USAGE)  # fmt: skip
    if not 0 <= node < settings.cluster.nodes:
        raise CtlError(f"--node {node} is out of range: cluster.nodes = "
                       f"{settings.cluster.nodes}", EXIT_USAGE)  # fmt: skip
    return out.replace("{node}", str(node))


def _address(address: str, root: Path) -> tuple[str, int]:
    """The (host, port) of a control.addr's ``host:port`` or ``[v6]:port``: the crawl writes
    it whole (a temporary file renamed), so anything else was not written by a crawl."""
    host, _, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(host)
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(port)
    except ValueError:
        raise CtlError(f"{root / ADDR_FILE} does not hold a listen address ({address[:60]!r}); "
                       "is a crawl starting there?", EXIT_UNREACHABLE) from None  # fmt: skip
    return host, int(port)


def read_seeds(path: Path) -> list[str]:
    """One URL per line; blank lines and '#' comments skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CtlError(f"cannot read {path}: {exc}", EXIT_USAGE) from None
    return [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]


def summary(status: dict[str, Any]) -> str:
    """A few lines for a human from the status JSON."""
    b = status.get("bottleneck") or {}
    hosts = status.get("hosts") or {}
    lines = [
        f"state      {status.get('state')}" + ("  (paused)" if status.get("paused") else ""),
        f"bottleneck {b.get('name')}" + (f": {b['detail']}" if b.get("detail") else ""),
        f"pages      {count_text(status.get('pages', 0))} "
        f"({rate_text(status.get('pages_per_s', 0.0))}/s, last 10 s), elapsed "
        f"{duration_text(status.get('elapsed_s', 0.0))} (all runs)",
        f"queued     {status.get('queued', 0):,} (memory {status.get('queued_memory', 0):,}, "
        f"disk {status.get('queued_disk', 0):,}); in flight {status.get('in_flight', 0)} of "
        f"{status.get('concurrency', 0)}",
        "hosts      with URLs queued or in flight: "
        + ", ".join(f"{k} {v:,}" for k, v in hosts.items()),
    ]
    fresh = status.get("freshness")
    if isinstance(fresh, dict) and fresh.get("enabled"):
        lines.insert(3, f"revisits   {count_text(status.get('revisits', 0))} "
                        f"({rate_text(status.get('revisits_per_s', 0.0))}/s, last 10 s)")
    run = status.get("this_run")
    if isinstance(run, dict) and float(status.get("elapsed_s", 0.0)) - float(
        run.get("elapsed_s", 0.0)
    ) >= 0.5:
        lines.insert(3, f"           {this_run_text(run)}")
    outcomes = status.get("outcomes") or {}
    if outcomes:
        lines.append("outcomes   " + ", ".join(f"{k} {v:,}" for k, v in outcomes.items()))
    if status.get("blocked_hosts"):
        lines.append("blocked    " + ", ".join(status["blocked_hosts"]))
    if status.get("host_delays"):
        lines.append("delays     " + ", ".join(f"{h} {d:g} s"
                                               for h, d in status["host_delays"].items()))
    if isinstance(fresh, dict) and fresh.get("enabled"):  # a continuous crawl
        from frontier_crawl.output.report import freshness_rows

        for i, (label, text) in enumerate(freshness_rows(fresh)):
            lines.append(f"{'freshness' if i == 0 else '':<10} {label}: {text}")
    for w in status.get("workers") or []:
        wb = w.get("bottleneck") or {}
        lines.append(f"worker {w.get('worker', '?')}: {w.get('state')}, {w.get('pages', 0):,} "
                     f"pages, {w.get('queued', 0):,} queued, {wb.get('name')}")  # fmt: skip
    cluster = status.get("cluster")
    if isinstance(cluster, dict):
        lines.extend(cluster_lines(cluster))
    return "\n".join(lines)


def _secs(value: object) -> str:
    if not isinstance(value, int | float):
        return "?"
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def cluster_lines(view: dict[str, Any]) -> list[str]:
    """The cluster's view (a cluster node's status ``cluster``) in lines for a human."""
    totals = view.get("totals") or {}
    rows = view.get("nodes") or []
    if not rows:
        return [f"cluster    {view.get('count')} nodes: not read from Redis yet"]
    alive, missing = view.get("alive") or [], view.get("missing") or []
    lines = [
        f"cluster    {view.get('count')} nodes, {len(alive)} alive"
        + (f", {len(missing)} missing" if missing else "")
        + (" (the crawl is over)" if view.get("ended") else "")
        + f"; pages {totals.get('pages', 0):,} ({totals.get('pages_per_s', 0.0):.1f}/s), "
        f"queued {totals.get('queued', 0):,}, in flight {totals.get('in_flight', 0):,} "
        f"(read {_secs(view.get('age_s'))} ago, this is node {view.get('me')})"
    ]
    for r in rows:
        b = r.get("bottleneck") or {}
        state = str(r.get("state"))
        if r.get("for_s") is not None:
            state += f" for {_secs(r['for_s'])}"
        heard = f", heard {_secs(r['heard_s'])} ago" if r.get("heard_s") is not None else ""
        lines.append(
            f"node {r.get('node')}:    {state}, {r.get('pages', 0):,} pages "
            f"({float(r.get('pages_per_s', 0.0)):.1f}/s), {r.get('queued', 0):,} queued"
            + (f", {b.get('name')}" if b.get("name") else "") + heard
            + (f", {r['batches_waiting']} batches wait in Redis" if r.get("batches_waiting")
               else "")
        )  # fmt: skip
    if view.get("waiting"):
        lines.append(f"waiting    {view['waiting']}")
    return lines


def _delay(value: str) -> float | None:
    if value.lower() in ("none", "off", "default", "config"):
        return None
    try:
        return float(value)
    except ValueError:
        raise CtlError(f"delay: SECONDS must be a number (or 'off'), got {value!r}",
                       EXIT_USAGE) from None  # fmt: skip


def run(config: Path, action: str, args: list[str], as_json: bool = False,
        html: bool = False, out: TextIO = sys.stdout, node: int | None = None) -> int:  # fmt: skip
    """One ``ctl`` action; the exit status (messages on stderr). ``node``: in a cluster, the
    node of this machine."""
    try:
        settings = load(config)
    except ConfigError as exc:
        sys.stderr.write(f"frontier-crawl ctl: config error: {exc}\n")
        return EXIT_USAGE
    try:
        return _run(Client(settings, node), settings, action, args, as_json, html, out, node)
    except CtlError as exc:
        sys.stderr.write(f"frontier-crawl ctl: {exc}\n")
        return exc.status


def _need(args: list[str], n: int, usage: str) -> list[str]:
    if len(args) != n:
        raise CtlError(f"usage: frontier-crawl ctl --config crawl.toml {usage}", EXIT_USAGE)
    return args


def _run(client: Client, settings: CrawlSettings, action: str, args: list[str], as_json: bool,
         html: bool, out: TextIO, node: int | None = None) -> int:  # fmt: skip
    reply: dict[str, Any]
    if action == "status":
        status = client.request("GET", "/api/status")
        if html:
            return _status_html(status, Path(node_output_dir(settings, node)), out)
        out.write((json.dumps(status, indent=1) if as_json else summary(status)) + "\n")
        return EXIT_OK
    if action == "dashboard":
        out.write(f"http://{client.address}/?token={client.token}\n")
        return EXIT_OK
    if action in ("pause", "resume", "stop", "reload"):
        _need(args, 0, action)
        reply = client.request("POST", f"/api/{action}")
    elif action in ("block", "unblock"):
        (host,) = _need(args, 1, f"{action} HOST")
        reply = client.request("POST", f"/api/{action}", {"host": host})
    elif action == "delay":
        host, seconds = _need(args, 2, "delay HOST SECONDS")
        body = {"host": host, "delay_s": _delay(seconds)}
        reply = client.request("POST", "/api/host-delay", body)
        if body["delay_s"] is not None and not reply.get("origins") and "result" in reply:
            raise CtlError(f"delay: no host named {host!r} is known to this crawl (not queued, "
                           "fetched or waiting); nothing changed", EXIT_REFUSED)  # fmt: skip
    elif action == "concurrency":
        (value,) = _need(args, 1, "concurrency N")
        if not value.isdigit():
            raise CtlError(f"concurrency: N must be a whole number, got {value!r}", EXIT_USAGE)
        reply = client.request("POST", "/api/concurrency", {"value": int(value)})
    elif action == "add-seeds":
        (name,) = _need(args, 1, "add-seeds FILE")
        urls = read_seeds(Path(name))
        given = admitted = 0
        for i in range(0, len(urls), SEEDS_PER_REQUEST):
            part = client.request("POST", "/api/seeds", {"urls": urls[i:i + SEEDS_PER_REQUEST]})
            given += int(part.get("given", 0))
            admitted += int(part.get("admitted", 0))
        reply = {"result": "applied", "command": "seeds", "given": given, "admitted": admitted}
    else:
        raise CtlError(f"unknown action {action!r} (one of: {', '.join(ACTIONS)})", EXIT_USAGE)
    out.write((json.dumps(reply) if as_json else _said(reply)) + "\n")
    return EXIT_OK


def _said(reply: dict[str, Any]) -> str:
    """A reply in words."""
    name = reply.get("command", "")
    if reply.get("result") == "queued":
        return f"{name}: queued ({reply.get('detail', '')})"
    if name == "seeds":
        return (f"{reply.get('admitted', 0)} of {reply.get('given', 0)} URL(s) admitted (the "
                "rest: already seen, out of scope, or not crawlable)")  # fmt: skip
    if name == "block":
        return f"{reply['host']} blocked ({reply.get('held', 0)} queued URL(s) held)"
    if name == "unblock":
        return f"{reply['host']} unblocked ({reply.get('released', 0)} queued URL(s) released)"
    if name == "host-delay":
        delay = reply.get("delay_s")
        return f"{reply['host']}: delay " + ("back to the config" if delay is None
                                              else f"{delay:g} s")  # fmt: skip
    if name == "reload":
        changed = reply.get("changed") or []
        return "reloaded: " + (", ".join(changed) if changed else "nothing changed")
    if name == "concurrency":
        return f"concurrency {reply.get('concurrency')}"
    return f"{name}: applied"


def _status_html(status: dict[str, Any], root: Path, out: TextIO) -> int:
    """``ctl status --html``: ``output_dir/report.html`` from the running crawl's status."""
    from frontier_crawl.output import write_status_html

    try:
        path = write_status_html(status, root)
    except OSError as exc:
        raise CtlError(f"ctl status --html: cannot write {root / 'report.html'}: {exc}",
                       EXIT_REFUSED) from None  # fmt: skip
    out.write(f"{path}\n")
    return EXIT_OK
