"""Which keys a running crawl takes from a reloaded crawl.toml (SIGHUP, ``ctl reload``).

Every key is in one of three groups:

* **identity**: what makes the crawl this crawl (seeds, output directory, worker count,
  partitioning, the cluster). A change is refused: it would be another crawl.
* **fixed while running**: read once when the crawl starts (the LMDB map, libcurl's
  transport and TLS setup, the HTTP cache, the WARC writer, the robots.txt cache and its
  token, per-IP grouping, the control listener, ``[sitemaps]``). A change is refused; it
  takes effect when the crawl is started again with the file.
* **reloadable**: everything else, applied at once (see docs/configuration.md, "Live reload",
  for what "at once" means per key).

A reload with any refused change applies nothing: the running config stays, and the reply
names every refused key.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from frontier_crawl.config.settings import SECTIONS, CrawlSettings

__all__ = ["FIXED", "IDENTITY", "ReloadPlan", "key_group", "reload_plan"]

IDENTITY = frozenset({
    "crawl.seeds", "crawl.seeds_file", "crawl.output_dir", "workers.processes",
    "workers.partition_by",
    "cluster.redis_url", "cluster.nodes", "cluster.key_prefix",
})  # fmt: skip
FIXED = frozenset({
    "frontier.lmdb_map_size_bytes", "fetch.resolve", "fetch.proxy", "fetch.allow_addresses",
    "fetch.verify_tls",
    "fetch.ca_bundle", "fetch.dns_cache_ttl_s", "fetch.http2", "fetch.parse_types",
    "fetch.cache", "fetch.cache_dir", "fetch.cache_max_bytes", "output.warc",
    "output.warc_max_bytes", "output.warc_prefix", "output.warc_compressor",
    "output.warc_gzip_level", "output.durability", "politeness.user_agent",
    "politeness.robots_token", "politeness.robots_ttl_s", "politeness.robots_stale_s",
    "politeness.per_ip", "control.listen", "cluster.heartbeat_ttl_s",
    "cluster.unreachable_timeout_s", "cluster.max_batch_bytes", "output.feeds", "spider.source",
    "spider.class",
    "spider.pipelines", "extract", "sitemaps.enabled", "sitemaps.robots", "sitemaps.paths",
    "sitemaps.max_bytes", "sitemaps.max_urls", "sitemaps.max_index_depth", "sitemaps.text",
    "recrawl.enabled", "logging.format", "logging.level",
})  # fmt: skip


def key_group(key: str) -> str:
    """``"identity"``, ``"fixed"`` or ``"reloadable"`` for a dotted key."""
    return "identity" if key in IDENTITY else "fixed" if key in FIXED else "reloadable"


@dataclass(slots=True, frozen=True)
class ReloadPlan:
    """What a reload would change: the changed reloadable keys, and the refused ones."""

    changed: tuple[str, ...]
    refused: tuple[str, ...]

    @property
    def message(self) -> str:
        """One sentence naming the refused keys (empty if none)."""
        if not self.refused:
            return ""
        identity = [k for k in self.refused if k in IDENTITY]
        fixed = [k for k in self.refused if k not in IDENTITY]
        parts = []
        if identity:
            parts.append(f"{', '.join(identity)}: the crawl's identity, cannot change while "
                         "it runs (a new crawl needs a new crawl.output_dir)")  # fmt: skip
        if fixed:
            parts.append(f"{', '.join(fixed)}: fixed while the crawl runs (stop it and start "
                         "it again to apply)")  # fmt: skip
        return "not reloaded, nothing changed: " + "; ".join(parts)


def reload_plan(old: CrawlSettings, new: CrawlSettings) -> ReloadPlan:
    """Compare the running settings with a reloaded file's, key by key."""
    before, after = msgspec.to_builtins(old), msgspec.to_builtins(new)
    changed: list[str] = []
    refused: list[str] = []
    for section, cls in SECTIONS.items():
        for field in msgspec.structs.fields(cls):
            name = field.encode_name  # as written in TOML (spider.class, not class_)
            if before[section].get(name) == after[section].get(name):
                continue
            key = f"{section}.{name}"
            (changed if key_group(key) == "reloadable" else refused).append(key)
    if before.get("extract") != after.get("extract"):  # [[extract]]: tables, not a section
        refused.append("extract")
    return ReloadPlan(tuple(changed), tuple(refused))
