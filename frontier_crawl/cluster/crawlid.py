"""Which crawl a node belongs to: a crawl id, so that no crawl adopts, or is ended or steered
by, another crawl's keys in Redis.

``<key_prefix>:identity`` holds the configuration every node must agree on (seeds, scope,
partitioning: ``workers.partition.cluster_identity``) and the crawl id (``"crawl"``: random,
made by the first node, or ``add-seeds``, that finds no identity there). Every other key of
the crawl is under ``<key_prefix>:<crawl id>`` (``client.Keys``): batches, acknowledgements,
counts, the probe and its answers, ``done``, memberships, summaries, reports. A node keeps the
id of its crawl in ``cluster.json`` in its output directory, written (durably) before it
first joins; ``<prefix>:<crawl id>:joined`` is the set of nodes that have joined the crawl.

:func:`adopt` decides, when a node joins:

* the node has a crawl id: Redis must name the same crawl (else it is refused: another crawl
  took this prefix); if Redis names none (Redis lost its data, or another prefix), the node's
  id is stored again, as the first node's would be, and the crawl goes on;
* the node has none (its first start): it joins the crawl Redis names unless that crawl has
  already had a node with this number (then this is another crawl started over that one's
  keys, or that node's state was lost: refused, naming the keys); with no crawl in Redis it
  creates one;
* state of a version without crawl ids (``cluster.lmdb`` and no ``cluster.json``): it goes
  on with a crawl started by such a version (id "", the keys it used), and is refused by a
  crawl with an id; a node without state is refused by a crawl without an id (its leftovers
  cannot be told from a live crawl).

A crawl whose keys are still in Redis is never replaced by a new one: a new crawl with the
same configuration needs another ``cluster.key_prefix``, or that crawl's keys deleted.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frontier_crawl.cluster.client import ClusterError, ClusterRefused, Keys, Redis
from frontier_crawl.safefs import make_dir, open_regular, replace_file

if TYPE_CHECKING:  # imported where used (client.py says why)
    import redis

CRAWL_FILE = "cluster.json"
"""A node's crawl id, in its output directory."""
_OWN = ("crawl", "started")  #: identity fields that are the crawl's, not the configuration's


def new_crawl_id() -> str:
    return os.urandom(8).hex()


def read_crawl_file(root: Path) -> str | None:
    """The crawl id kept in ``root`` (None: this node has not joined a crawl yet)."""
    path = root / CRAWL_FILE
    try:
        with open_regular(path) as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ClusterRefused(
            f"{path} cannot be read ({exc}): it names the cluster crawl this node's state "
            "belongs to"
        ) from None
    crawl = data.get("crawl") if isinstance(data, dict) else None
    if not isinstance(crawl, str):
        raise ClusterRefused(f"{path} names no crawl id: it names the cluster crawl this "
                             "node's state belongs to")  # fmt: skip
    return crawl


def write_crawl_file(root: Path, crawl: str) -> None:
    make_dir(root)
    replace_file(root / CRAWL_FILE, json.dumps({"crawl": crawl}).encode())


def differing_keys(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """The configuration keys whose values differ (the crawl's own fields aside)."""
    return sorted(
        k for k in {*ours, *theirs} if k not in _OWN and ours.get(k) != theirs.get(k)
    )


def _stored(client: redis.Redis, keys: Keys, ours: str) -> bytes | None:
    """The identity in Redis, ``ours`` stored first if there is none (the first node's stays).
    A write only when needed: Redis may be full."""
    if client.get(keys.identity) is None:
        client.set(keys.identity, ours, nx=True)
    raw: Any = client.get(keys.identity)
    return bytes(raw) if raw is not None else None


def stored_identity(
    link: Redis, base: str, identity: Mapping[str, Any], crawl: str | None
) -> dict[str, Any]:
    """The identity Redis holds under ``base`` (``identity`` with ``crawl``, or a new crawl id
    if None, stored first if Redis holds none)."""
    ours = json.loads(json.dumps(identity))  # as it reads back
    mine = {**ours, "crawl": crawl if crawl is not None else new_crawl_id(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    if crawl == "":  # a crawl of a version without crawl ids: stored as that version did
        del mine["crawl"], mine["started"]
    keys = Keys(base)
    raw = link.call("storing the crawl identity", lambda c: _stored(c, keys, json.dumps(mine)))
    try:
        theirs = json.loads(raw) if raw else mine
    except ValueError:
        theirs = None
    if not isinstance(theirs, dict):
        raise ClusterRefused(
            f"Redis key {keys.identity} does not hold a crawl identity: it was not written by "
            "frontier-crawl; choose another cluster.key_prefix"
        )
    return theirs


def check_configuration(
    ours: Mapping[str, Any],
    theirs: Mapping[str, Any],
    upgradable: Mapping[str, Collection[Any] | None] | None,
    keys: Keys,
) -> None:
    """Refused if the configuration differs from the crawl's in Redis (``upgradable``: keys
    whose value in Redis may be one of these older ones; None: any value, a key older
    versions wrote that this one no longer compares)."""
    ours = json.loads(json.dumps(ours))
    older = upgradable or {}
    changed = [
        k
        for k in differing_keys(ours, theirs)
        if k not in older or ((values := older[k]) is not None and theirs.get(k) not in values)
    ]
    if changed:
        detail = "; ".join(
            f"{k}: {theirs.get(k)!r} in the cluster, {ours.get(k)!r} here" for k in changed
        )
        raise ClusterRefused(
            f"this node's crawl identity differs from the cluster's ({detail}). Every node "
            "must use the same configuration (these keys), or choose another "
            f"cluster.key_prefix for a new crawl (this one's keys: {keys.base}:*)."
        )


def _named(theirs: Mapping[str, Any]) -> str:
    crawl = theirs.get("crawl")
    if not crawl:
        return "a crawl started by a version without crawl ids"
    return f"crawl {crawl}" + (f", started {theirs['started']}" if theirs.get("started") else "")


def adopt(
    link: Redis,
    base: str,
    identity: Mapping[str, Any],
    upgradable: Mapping[str, Collection[Any] | None] | None,
    *,
    node: int,
    root: Path,
    has_state: bool,
    running: Callable[[Keys], bool],
) -> Keys:
    """The keys of the crawl node ``node`` (its output directory ``root``; ``has_state``: it
    ran under a version without crawl ids) belongs to, or ClusterRefused (module docstring);
    ``running(keys)``: whether a process holds node ``node``'s membership of that crawl.
    A node joining for the first time has the crawl id in ``root`` before it is in the
    crawl's ``joined`` set (so that a kill between the two is harmless)."""
    local = read_crawl_file(root)
    if local is None and has_state:
        local = ""  # state of a version without crawl ids: the keys that version used
    theirs = stored_identity(link, base, identity, local)
    crawl = str(theirs.get("crawl") or "")
    keys = Keys(base, crawl)
    check_configuration(identity, theirs, upgradable, keys)
    remedy = (
        f"Choose another cluster.key_prefix for a new crawl, or delete that crawl's keys "
        f"({base}:*) if it is over"
    )
    if local is not None:
        if local != crawl:
            raise ClusterRefused(
                f"Redis holds {_named(theirs)} under cluster.key_prefix {base!r}, but this "
                f"node's state (in {root}) belongs to "
                + (f"crawl {local}" if local else "a crawl started by a version without crawl "
                   "ids") + f". {remedy}."
            )  # fmt: skip
        if local == "":
            write_crawl_file(root, "")
        return keys
    if not crawl:
        raise ClusterRefused(
            f"Redis holds {_named(theirs)} under cluster.key_prefix {base!r}, and this node has "
            f"no state of it (in {root}): it cannot tell that crawl's leftovers from a live "
            f"crawl. {remedy}."
        )
    joined = link.call("reading the crawl's nodes", lambda c: c.sismember(keys.joined, str(node)))
    if joined and running(keys):
        raise ClusterRefused(
            f"node {node} is already running ({_named(theirs)}; its membership is live), and "
            f"this output directory ({root}) has no state of that crawl: start each --node "
            "once, on its own output directory"
        )
    if joined:
        raise ClusterRefused(
            f"Redis holds {_named(theirs)} under cluster.key_prefix {base!r}, which node "
            f"{node} has already joined, but this node has no state of it (in {root}): this "
            f"is another crawl started over its keys, or node {node}'s state was lost. "
            f"{remedy}; to go on with that crawl, start node {node} on its own output "
            "directory."
        )
    write_crawl_file(root, crawl)
    return keys


def mark_joined(link: Redis, keys: Keys, node: int) -> None:
    """Record that ``node`` has joined the crawl (after its crawl file: :func:`adopt`)."""
    link.call("joining", lambda c: c.sadd(keys.joined, str(node)))


def crawl_keys(
    link: Redis,
    base: str,
    identity: Mapping[str, Any] | None = None,
    upgradable: Mapping[str, Collection[Any] | None] | None = None,
) -> Keys:
    """The keys of the crawl Redis names under ``base`` (``report``, ``add-seeds``), checked
    against ``identity`` if given; with ``identity``, a crawl is created if there is none
    (``add-seeds`` before the first node starts)."""
    keys = Keys(base)
    if identity is None:
        raw = link.call("reading the crawl identity", lambda c: c.get(keys.identity))
        if raw is None:
            raise ClusterError(
                f"Redis holds no crawl under cluster.key_prefix {base!r}: no node has joined "
                "yet (or the keys were deleted)"
            )
        try:
            theirs = json.loads(raw)
        except ValueError:
            theirs = None
        if not isinstance(theirs, dict):
            raise ClusterRefused(f"Redis key {keys.identity} does not hold a crawl identity")
    else:
        theirs = stored_identity(link, base, identity, None)
        check_configuration(identity, theirs, upgradable, keys)
    return Keys(base, str(theirs.get("crawl") or ""))

