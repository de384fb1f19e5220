"""What identifies a crawl and a URL in it.

The crawl: ``identity.json`` in the state directory pins what a crawl cannot change between
runs, the state layout version (:func:`check_identity`); tunables may change freely. Older
versions also pinned the seen-set's Bloom filter sizing (``seen_capacity``,
``seen_error_rate``): an identity holding them is accepted, the keys are ignored
(``RETIRED_KEYS``).

A URL, once canonical (``urls.canonicalize``), has these keys, computed once and reused:

* its **origin** (``urls.origin``: scheme, host, port): the key of its host queue
  (``hosts.HostQueue``), of its robots.txt, of its politeness, and the unit the workers
  partition by (``mailbox.owner_of``, a stable hash of the origin);
* its **digest** (``urls.url_digest``: blake2b of the host, then of the URL): its key in the
  seen-set (LMDB, ``seen.py``), grouped by host;
* its **queue key** (``store.py``: host id, rank (from its priority), seq): where it waits in
  LMDB until done, in its host's order.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.urls import canonicalize, origin, url_digest
from frontier_crawl.safefs import open_regular, replace_file

__all__ = [
    "LAYOUT_VERSION",
    "RETIRED_KEYS",
    "UPGRADABLE_LAYOUTS",
    "StateMismatch",
    "canonicalize",
    "check_identity",
    "origin",
    "url_digest",
]

log = logging.getLogger(__name__)

#: 2: url_digest = blake2b(host) + blake2b(url); compact queue values
#: 3: a worker's inbox in its own environment, state/inbox.lmdb (frontier/mailbox.py)
#: 4: queue blocks under host ids with done masks (store.py); seen keyed by host hash with
#:    URL-hash dups, seen_recent in chunks (seen.py)
#: 5: queue entries and worker link batches carry a spider request's callback, meta and
#:    priority (store.py, mailbox.py)
#: 6: per-host queue counts in b"counts" (store.py), so a restart reads no queue block; a
#:    state of layout 4 or 5 gets them from one scan of its blocks at its first start
LAYOUT_VERSION = 6
#: identity keys older versions wrote and this one ignores: the Bloom filter's sizing
RETIRED_KEYS = frozenset({"seen_capacity", "seen_error_rate"})
#: older layouts this version continues in place (their data reads as this layout's)
UPGRADABLE_LAYOUTS = frozenset({4, 5})


class StateMismatch(ValueError):
    """The output directory holds a crawl this configuration cannot continue."""


def check_identity(state_dir: Path) -> None:
    """Refuse to continue a crawl whose identity the configuration would change."""
    path = state_dir / "identity.json"
    mine = {"layout_version": LAYOUT_VERSION}
    if not path.exists():
        replace_file(path, json.dumps(mine, indent=1).encode())
        return
    try:
        with open_regular(path) as f:  # a link, a FIFO: damaged, never followed
            theirs = json.loads(f.read())
        if not isinstance(theirs, dict):
            raise ValueError(f"a JSON {type(theirs).__name__}, not an object")
    except (OSError, ValueError) as exc:
        # damage, not a mismatch: written again, the layout version being all it pins
        raise DamagedState(
            path,
            f"unreadable crawl identity ({exc})",
            "It is written again; nothing is lost. Only the layout version could not be "
            f"checked (this program writes version {LAYOUT_VERSION}).",
        ) from None
    theirs = {key: value for key, value in theirs.items() if key not in RETIRED_KEYS}
    older = theirs.get("layout_version")
    if older in UPGRADABLE_LAYOUTS and {**theirs, "layout_version": LAYOUT_VERSION} == mine:
        # layout 4 is layout 5 without callbacks: its queue entries and batches read as
        # entries for the default callback; layout 5 is 6 without the per-host queue counts,
        # which QueueStore writes from one scan of the blocks; the identity says 6 now
        replace_file(path, json.dumps(mine, indent=1).encode())
        log.warning("%s: crawl state of layout version %s continued as version %d (%sthe "
                    "queue's per-host counts are written once, from a scan of its blocks); "
                    "frontier-crawl versions before layout %d cannot read it any more",
                    path, older, LAYOUT_VERSION,
                    "its queued URLs go to the spider's default callback, parse, with empty "
                    "meta; " if older == 4 else "", LAYOUT_VERSION)  # fmt: skip
        return
    if isinstance(older, int) and older != LAYOUT_VERSION:
        raise StateMismatch(
            f"{state_dir.parent} holds a crawl of state layout version {older}, which "
            f"this frontier-crawl (layout {LAYOUT_VERSION}) cannot continue"
            + (" (it was written by a newer version: continue it with that version)"
               if older > LAYOUT_VERSION else
               f" (layouts {sorted(UPGRADABLE_LAYOUTS)} are continued in place; older ones "
               "are not: finish the crawl with the version that started it)")
            + ", or set crawl.output_dir to a new directory to start a new crawl."
        )  # fmt: skip
    changed = [
        f"{key}: {theirs.get(key)!r} in the existing crawl, {value!r} now"
        for key, value in mine.items()
        if theirs.get(key) != value
    ]
    if changed:
        raise StateMismatch(
            f"{state_dir.parent} holds a crawl that cannot continue with this "
            f"configuration ({'; '.join(changed)}): set crawl.output_dir to a new directory "
            "to start a new crawl."
        )
