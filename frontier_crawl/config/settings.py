"""Typed, frozen crawl settings: one class per TOML section.

Every key has a default that is safe on the real web; units are part of the key name
(``_s`` seconds, ``_bytes`` bytes). Numeric bounds are declared with ``msgspec.Meta`` so a bad
value is reported with its full key path; cross-field checks live in ``__post_init__`` and raise
``ValueError("<key>: <problem>")`` so the loader can prefix the section name.

The reference of every key (``docs/config.md``) is generated from these classes by
``frontier-crawl config-reference``; the ``doc`` strings below are that reference.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from frontier_crawl.config.checks import (
    ascii_problem,
    feed_parts,
    feed_path_problem,
    has_controls,
    plain_name_problem,
    proxy_url_problem,
    redis_url_problem,
)

#: Upper bound of every duration (a year): larger values, inf and nan overflow the C types of
#: libcurl, poll() and sleep() the run hands them to, and mean nothing for a crawl anyway.
MAX_SECONDS = 31_536_000.0
#: Upper bound of every count and size: the C ``long`` / ``curl_off_t`` libcurl takes them as.
MAX_COUNT = 1 << 62

NonNegFloat = Annotated[float, Meta(ge=0, le=MAX_SECONDS)]
PosFloat = Annotated[float, Meta(gt=0, le=MAX_SECONDS)]
NonNegInt = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
PosInt = Annotated[int, Meta(ge=1, le=MAX_COUNT)]

#: RFC 9309 2.2.1: a product token is letters, "_" and "-"
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
_RESOLVE_RE = re.compile(r"^(?P<host>[^:\s]+):(?P<port>\d{1,5}):(?P<addr>\S+)$")
#: the address categories ``fetch.allow_addresses`` may name (their networks: fetch/addresses.py)
ADDRESS_CATEGORIES = (
    "loopback", "private", "link-local", "shared", "multicast", "unspecified", "reserved",
)  # fmt: skip


class _Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base for sections: frozen, keyword-only, unknown keys rejected."""


class CrawlSection(_Section, frozen=True):
    seeds: Annotated[tuple[str, ...], Meta(description="Start URLs (http or https).")] = ()
    seeds_file: Annotated[
        str | None, Meta(description="File with one seed URL per line ('#' comments allowed).")
    ] = None
    output_dir: Annotated[
        str,
        Meta(
            description="Directory for WARC files, crawl log, report and frontier state; "
            "relative paths are relative to the config file. Unset: crawls/<the config file's "
            "name without .toml> beside it, named at start and by --check (a resume finds "
            "its state there; two config files never share one by default)."
        ),
    ] = "crawl-output"
    max_depth: Annotated[
        NonNegInt, Meta(description="Links followed from a seed (seeds are depth 0).")
    ] = 20
    max_pages: Annotated[
        NonNegInt,
        Meta(description="URLs admitted to the frontier over all runs of the crawl, 0: no limit."),
    ] = 0
    max_pages_per_host: Annotated[
        NonNegInt,
        Meta(description="URLs admitted per host (origin) over all runs, 0 for no limit."),
    ] = 0
    max_url_length: Annotated[
        Annotated[int, Meta(ge=16, le=MAX_COUNT)],
        Meta(description="Longer canonical URLs are refused (outcome max-url-length)."),
    ] = 2048
    max_repeated_segments: Annotated[
        NonNegInt,
        Meta(
            description="A path segment repeated more often is a trap such as /a/b/a/b/... "
            "(outcome max-repeated-segments); 0 for no limit."
        ),
    ] = 3
    max_query_params: Annotated[
        NonNegInt,
        Meta(
            description="URLs with more query parameters are refused (outcome "
            "max-query-params); 0 for no limit."
        ),
    ] = 30
    stop_timeout_s: Annotated[
        NonNegFloat,
        Meta(
            description="On SIGINT/SIGTERM, how long in-flight transfers may finish before "
            "they are abandoned (and refetched on resume)."
        ),
    ] = 30.0
    allow_shared_output_dir: Annotated[
        bool,
        Meta(
            description="Run even if output_dir (or its state/, warc/, worker-<i>/ or the HTTP "
            "cache directory) belongs to another user or is writable by its group or by "
            "others. false: such a directory is refused at start (exit 2), since whoever can "
            "write there can plant files the crawl reads as its state or writes through."
        ),
    ] = False

    def __post_init__(self) -> None:
        for seed in self.seeds:
            if not seed.lower().startswith(("http://", "https://")):
                raise ValueError(f"seeds: only http and https URLs are allowed, got {seed!r}")


class ScopeSection(_Section, frozen=True):
    allow_domains: Annotated[
        tuple[str, ...],
        Meta(
            description="Host names to crawl, each with its subdomains; '*.example.com' is the "
            "subdomains only. Written like hosts in URLs: IDNA (UTS-46) and case are "
            "normalised ('München.de' is 'xn--mnchen-3ya.de'), IPv6 in brackets. A scheme, "
            "port, path or other wildcard is refused, and so is a seed outside the scope "
            "(config errors, exit 2). Empty: the seeds' hosts."
        ),
    ] = ()
    exclude: Annotated[
        tuple[str, ...], Meta(description="Regular expressions; a URL matching any is skipped.")
    ] = ()
    any_port: Annotated[
        bool,
        Meta(
            description="Crawl every port of an allowed host. False: only ports 80 and 443, "
            "the explicit ports of the seeds (on every allowed host) and the port of each "
            "fetch.resolve entry (on its host): another port of a host is another service, as "
            "an origin is to a browser."
        ),
    ] = False

    def __post_init__(self) -> None:
        for pattern in self.exclude:
            try:
                re.compile(pattern)
            except re.error as exc:
                msg = f"exclude: invalid regular expression {pattern!r}: {exc}"
                raise ValueError(msg) from None


class PolitenessSection(_Section, frozen=True):
    min_delay_s: Annotated[
        NonNegFloat,
        Meta(
            description="Least seconds between two request starts to one host (per IP group "
            "with per_ip), however many connections are open; with connections_per_host = 1 "
            "the next request also waits this long after the end of the previous response."
        ),
    ] = 1.0
    connections_per_host: Annotated[
        PosInt,
        Meta(
            description="Requests open at once to one host (per IP group with per_ip). Bounds "
            "concurrency only: request starts stay spaced by the delay (min_delay_s, the "
            "adaptive delay, Crawl-delay), so more connections only keep a slow response from "
            "holding back the next request once its start is due."
        ),
    ] = 1
    obey_robots: Annotated[
        bool, Meta(description="Fetch robots.txt first and obey it, Crawl-delay included.")
    ] = True
    user_agent: Annotated[
        str,
        Meta(
            description="User-Agent header. Its product token (the text before the first '/' "
            "or space) also names our group in robots.txt, unless robots_token is set."
        ),
    ] = "frontier-crawl/0.1 (+https://github.com/frontier-crawl/frontier-crawl)"
    robots_token: Annotated[
        str,
        Meta(
            description="Product token matched against robots.txt User-agent lines (letters, "
            "'_' and '-' only, RFC 9309 2.2.1); empty: user_agent's product token. A group "
            "applies when the token of one of its User-agent lines (its value up to the first "
            "other character) equals this one, case-insensitively; else the '*' group; else "
            "none (allow all)."
        ),
    ] = ""
    robots_ttl_s: Annotated[
        PosFloat,
        Meta(
            description="How long a fetched robots.txt is used before it is fetched again "
            "(kept in the disk cache across runs). A host that is still crawling then fetches "
            "it in its next request slot, spaced like a page, and goes on with the rules it "
            "has in its other slots until the answer, whose rules apply from then on. Values "
            "above 86400 act as 86400 (a warning in the report): RFC 9309 2.4 allows a "
            "cached copy for 24 hours at most."
        ),
    ] = 86_400.0
    robots_stale_s: Annotated[
        NonNegFloat,
        Meta(
            description="While robots.txt is unreachable (429, 5xx, or no complete answer: "
            "timeout, connection or TLS failure; RFC 9309 2.4), the copy fetched last (also one "
            "in the disk cache from an earlier run) is used until its age passes robots_ttl_s "
            "(capped at 86400) plus this many seconds, and the fetch is retried after "
            "robots_retry_s, doubling; the host crawls on with it and is not retired meanwhile. "
            "With no such copy the host fetches nothing until robots.txt answers, and is "
            "retired once robots_attempts fetches in a row (those made while the copy was used "
            "included) found it unreachable. 0: no out-of-date copy is used."
        ),
    ] = 2_592_000.0
    robots_retry_s: Annotated[
        PosFloat,
        Meta(
            description="First wait before fetching again a robots.txt that was unreachable "
            "(doubles with each failure in a row). A 429 or 503 answer's Retry-After, capped "
            "by fetch.max_retry_delay_s, holds the whole host that long, and the fetch waits "
            "at least that long. With no usable copy (robots_stale_s) the host fetches "
            "nothing meanwhile."
        ),
    ] = 30.0
    robots_attempts: Annotated[
        PosInt,
        Meta(
            description="Fetches in a row that found robots.txt unreachable (429, 5xx, no "
            "complete answer) after which a host with no usable copy (robots_stale_s) is "
            "retired and its URLs recorded as robots-unavailable. A 4xx other than 429, a "
            "redirect chain longer than five hops, or one cut short by scope or the address "
            "policy, is not unreachable: it allows everything."
        ),
    ] = 4
    delay_factor: Annotated[
        NonNegFloat,
        Meta(
            description="Adaptive delay: this many times the duration of the host's last "
            "complete response, clamped to [min_delay_s, max_delay_s] (0: fixed min_delay_s); "
            "it spaces request starts as min_delay_s does, and so slows a host that answers "
            "slowly. A failed transfer (timeout, reset) counts as 0 s: one hanging URL does "
            "not snooze its host."
        ),
    ] = 2.0
    max_delay_s: Annotated[
        NonNegFloat,
        Meta(
            description="Upper bound of the adaptive delay (never below min_delay_s; does "
            "not cap Crawl-delay)."
        ),
    ] = 30.0
    max_crawl_delay_s: Annotated[
        NonNegFloat,
        Meta(
            description="Cap on a robots.txt Crawl-delay; 0 honours any value (a host with a "
            "long Crawl-delay stays snoozed, never dropped)."
        ),
    ] = 0.0
    backoff_s: Annotated[
        NonNegFloat,
        Meta(
            description="Per-host backoff, from the end of the response, after a host-wide "
            "signal: 429, 503, a DNS/connect/TLS failure, or failures of host_error_urls "
            "distinct URLs in a row; doubles with each consecutive one, reset by any good "
            "response (a 429/503 Retry-After holds the host too, up to "
            "fetch.max_retry_delay_s)."
        ),
    ] = 5.0
    max_backoff_s: Annotated[
        NonNegFloat, Meta(description="Upper bound of the per-host backoff.")
    ] = 600.0
    max_host_errors: Annotated[
        NonNegInt,
        Meta(
            description="Consecutive DNS/connection failures after which a host is retired and "
            "its queued URLs recorded as host-unreachable; 0 never retires."
        ),
    ] = 10
    host_error_urls: Annotated[
        PosInt,
        Meta(
            description="Transient failures (timeouts, resets, 5xx other than 503) of this many "
            "distinct URLs of one host in a row, with no good response between, count as "
            "host-wide and start the per-host backoff. Fewer only retry the failing URLs, each "
            "after its own retry delay, behind the host's other URLs."
        ),
    ] = 3
    per_ip: Annotated[
        bool,
        Meta(
            description="Hosts resolving to one IP address share one delay budget and "
            "connection limit."
        ),
    ] = False

    def __post_init__(self) -> None:
        ua = self.user_agent
        if not ua.strip() or not ua.isascii() or has_controls(ua.replace("\t", " ")):
            raise ValueError(
                "user_agent: must be a non-empty single line of printable ASCII (an HTTP "
                f"header value, sent as it is), got {ua!r}"
            )
        if self.robots_token and not _PRODUCT_TOKEN.fullmatch(self.robots_token):
            raise ValueError(
                f"robots_token: {self.robots_token!r} is not a product token (letters, '_' "
                "and '-' only, RFC 9309 2.2.1)"
            )
        if not self.robots_token and not _PRODUCT_TOKEN.fullmatch(self.product_token):
            raise ValueError(
                f"user_agent: its product token {self.product_token!r} has characters a "
                "robots.txt product token cannot have (letters, '_' and '-' only, RFC 9309 "
                "2.2.1): set politeness.robots_token to the name robots.txt files know us by"
            )

    @property
    def product_token(self) -> str:
        """The name matched against robots.txt groups: robots_token, or the User-Agent's
        product token (its text before the first '/' or space)."""
        return self.robots_token or re.split(r"[/\s]", self.user_agent.strip(), maxsplit=1)[0]


class FetchSection(_Section, frozen=True):
    concurrency: Annotated[
        Annotated[int, Meta(ge=1, le=10_000)], Meta(description="Transfers in flight at once.")
    ] = 256
    connect_timeout_s: Annotated[
        PosFloat, Meta(description="Timeout for DNS and TCP/TLS connect.")
    ] = 10.0
    timeout_s: Annotated[PosFloat, Meta(description="Timeout for a whole transfer.")] = 30.0
    low_speed_bytes_s: Annotated[
        NonNegInt, Meta(description="Abort a transfer slower than this for low_speed_time_s.")
    ] = 100
    low_speed_time_s: Annotated[
        int,
        Meta(
            ge=2,
            le=int(MAX_SECONDS),
            description=(
                "Seconds below low_speed_bytes_s before aborting. At least 2: libcurl samples "
                "the speed once a second, so a 1 s window aborts transfers running far above "
                "the limit."
            ),
        ),
    ] = 15
    max_body_bytes: Annotated[
        PosInt,
        Meta(
            description="Cap on a body's size after decompression; larger is too-large. "
            "robots.txt is exempt: its first 512 KiB are read and parsed whatever this cap, "
            "the rest is not read (RFC 9309 2.5)."
        ),
    ] = 10_485_760
    max_redirects: Annotated[
        NonNegInt, Meta(description="Redirect hops followed from one URL.")
    ] = 5
    retries: Annotated[
        NonNegInt,
        Meta(
            description="Retries of a transient failure (timeout, connect, 5xx, 429): a URL is "
            "tried at most retries + 1 times, each retry after its own delay (retry_backoff_s, "
            "doubling, or the Retry-After) and behind its host's other queued URLs."
        ),
    ] = 3
    retry_backoff_s: Annotated[
        NonNegFloat, Meta(description="First retry delay; doubles with each retry.")
    ] = 2.0
    max_retry_delay_s: Annotated[
        NonNegFloat,
        Meta(
            description="Upper bound of a retry delay, and of how long a 429/503 Retry-After "
            "holds its host. A URL answered with a longer Retry-After holds the host this "
            "long and is given up (http-error), not retried after each cap."
        ),
    ] = 300.0
    resolve: Annotated[
        tuple[str, ...],
        Meta(description="Like curl --resolve: 'host:port:address' entries."),
    ] = ()
    proxy: Annotated[
        str | None,
        Meta(
            description="Proxy URL (http://, socks5://, socks5h://). Connections go to it "
            "whatever its address; proxy settings from the environment (http_proxy, "
            "no_proxy) are never used."
        ),
    ] = None
    allow_addresses: Annotated[
        tuple[str, ...],
        Meta(
            description="Address categories (loopback, private, link-local, shared, "
            "multicast, unspecified, reserved) or CIDR networks ('10.1.0.0/16') connections "
            "may go to. Empty: public addresses only, plus the seeds' hosts (any address) and "
            "the categories of the addresses given for them (a literal address in a seed, a "
            "fetch.resolve entry). Checked on the address connected to, after DNS; a refused "
            "URL is address-refused and its host retired. With a proxy, only literal "
            "addresses in URLs are checked (the proxy resolves names)."
        ),
    ] = ()
    verify_tls: Annotated[
        bool, Meta(description="Verify TLS certificates (false is warned about in log and report).")
    ] = True
    ca_bundle: Annotated[
        str | None, Meta(description="CA bundle file to trust instead of the system store.")
    ] = None
    dns_cache_ttl_s: Annotated[
        NonNegInt, Meta(description="How long resolved addresses are reused.")
    ] = 120
    parse_types: Annotated[
        tuple[str, ...],
        Meta(description="Content types parsed for links (others are archived only)."),
    ] = ("text/html", "application/xhtml+xml")
    http2: Annotated[
        bool,
        Meta(description="Offer HTTP/2 over TLS (ALPN); false: HTTP/1.1 only."),
    ] = True
    cache: Annotated[
        bool,
        Meta(
            description="HTTP cache on disk for recrawls: requests for stored URLs are "
            "conditional and a 304 reuses the stored response (WARC revisit record)."
        ),
    ] = False
    cache_dir: Annotated[
        str,
        Meta(
            description="Directory of the HTTP cache, shared by the crawls that name it; "
            "relative paths are relative to the config file."
        ),
    ] = "httpcache"
    cache_max_bytes: Annotated[
        Annotated[int, Meta(ge=1 << 20, le=MAX_COUNT)],
        Meta(description="Size bound of the HTTP cache (least recently stored evicted first)."),
    ] = 1 << 30

    def __post_init__(self) -> None:
        for entry in self.resolve:
            m = _RESOLVE_RE.match(entry)
            if m is None or not 0 < int(m["port"]) < 65536 or ascii_problem(entry, ""):
                raise ValueError(f"resolve: expected 'host:port:address', got {entry!r}")
        for entry in self.allow_addresses:
            if entry.strip().lower() in ADDRESS_CATEGORIES:
                continue
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"allow_addresses: {entry!r} is neither an address category "
                    f"({', '.join(ADDRESS_CATEGORIES)}) nor a CIDR network such as "
                    "'10.1.0.0/16' or 'fd00::/8'"
                ) from None
        if self.proxy is not None:
            problem = proxy_url_problem(self.proxy)
            if problem:
                raise ValueError(f"proxy: {problem}")
        if self.ca_bundle is not None:
            problem = ascii_problem(self.ca_bundle, "the path")
            if problem or not self.ca_bundle:
                raise ValueError(f"ca_bundle: {problem or 'must not be empty'}")
        for kind in self.parse_types:
            if not kind or has_controls(kind) or not kind.isascii():
                raise ValueError(f"parse_types: {kind!r} is not a content type")


class FrontierSection(_Section, frozen=True):
    memory_urls: Annotated[
        PosInt, Meta(description="Queued URLs held in memory over all hosts; the rest in LMDB.")
    ] = 200_000
    seen_capacity: Annotated[
        PosInt,
        Meta(
            description="Ignored (no longer used: the seen-set is exact in LMDB, with no Bloom "
            "filter to size); accepted so that older crawl.toml files load."
        ),
    ] = 10_000_000
    seen_error_rate: Annotated[
        Annotated[float, Meta(gt=0, lt=1)],
        Meta(
            description="Ignored (no longer used: the seen-set is exact in LMDB, with no Bloom "
            "filter to size); accepted so that older crawl.toml files load."
        ),
    ] = 1e-7
    commit_interval_s: Annotated[
        NonNegFloat,
        Meta(
            description="Group commit: frontier changes are committed (one fdatasync) at most "
            "this often; a kill redoes at most this much work, nothing is lost."
        ),
    ] = 0.05
    checkpoint_interval_s: Annotated[
        PosFloat, Meta(description="Seconds between frontier checkpoints.")
    ] = 30.0
    lmdb_map_size_bytes: Annotated[
        Annotated[int, Meta(ge=1 << 20, le=1 << 44)],
        Meta(
            description="Upper bound of the LMDB file (sparse; grows as used). At most 16 TiB: "
            "each environment is mapped whole into the process's address space (128 TiB on "
            "x86-64), and a worker maps several (its frontier, its inbox, its peers')."
        ),
    ] = 1 << 40


#: the callback name a sitemap URL is queued with (re-exported by ``parse/sitemap.py``): no
#: spider callback name can start with NUL, so a spider never sees one. Here, in the leaf
#: both the frontier (which queues sitemaps) and the parser (which reads them) import.
SITEMAP_CALLBACK = "\x00sitemap"
#: the sitemap protocol's caps on one file: 50,000 URLs and 50 MiB uncompressed
SITEMAP_MAX_URLS = 50_000
SITEMAP_MAX_BYTES = 52_428_800


class SitemapsSection(_Section, frozen=True):
    enabled: Annotated[
        bool,
        Meta(
            description="Read sitemaps (sitemaps.org: urlset and sitemapindex, plain or gzip, "
            "and text files of one URL per line) and queue the URLs they list, within the "
            "scope. Off: a crawl is what it was without this section."
        ),
    ] = False
    robots: Annotated[
        bool,
        Meta(
            description="Follow the Sitemap: lines of each host's robots.txt (one naming "
            "another host is queued only if that host is in scope)."
        ),
    ] = True
    paths: Annotated[
        tuple[str, ...],
        Meta(
            description="Paths fetched as sitemaps on every host once its robots.txt is known "
            "(robots.txt rules apply to them); empty: none."
        ),
    ] = ("/sitemap.xml",)
    max_bytes: Annotated[
        Annotated[int, Meta(ge=1024, le=MAX_COUNT)],
        Meta(
            description="Bytes of one sitemap read, after decompression (the transfer and a "
            "gzip file alike); past it the rest is not read (outcome sitemap-too-large, the "
            "URLs before the cut are kept). The protocol's limit is 50 MiB."
        ),
    ] = SITEMAP_MAX_BYTES
    max_urls: Annotated[
        PosInt,
        Meta(
            description="URLs (or child sitemaps of an index) read from one file; the rest is "
            "not read (outcome sitemap-too-large). The protocol's limit is 50,000."
        ),
    ] = SITEMAP_MAX_URLS
    max_index_depth: Annotated[
        Annotated[int, Meta(ge=0, le=16)],
        Meta(
            description="Levels of sitemap indexes followed: a sitemap found in robots.txt or "
            "paths is level 0, the children of a level-n index are level n + 1 and are queued "
            "while n + 1 <= this (0: indexes are read but their children not queued). The "
            "protocol allows 1 (an index lists sitemaps, not indexes); 2 tolerates one nested "
            "index."
        ),
    ] = 2
    text: Annotated[
        bool,
        Meta(
            description="Accept text sitemaps (UTF-8, one absolute http(s) URL per line); "
            "false: a body that is not XML is outcome sitemap-invalid."
        ),
    ] = True

    def __post_init__(self) -> None:
        for i, path in enumerate(self.paths):
            if (
                not path.startswith("/")
                or path.startswith("//")
                or has_controls(path)
                or any(c.isspace() for c in path)
            ):
                raise ValueError(
                    f'paths[{i}]: expected an absolute path such as "/sitemap.xml" (one '
                    f'"/" first, no spaces or control characters), got {path!r}'
                )


class RecrawlRule(_Section, frozen=True):
    """One ``[[recrawl.rules]]`` table: the interval bounds of the URLs its pattern matches."""

    pattern: Annotated[
        str,
        Meta(
            description="Regular expression (Python syntax) searched in the canonical URL; the "
            "first rule that matches sets the URL's bounds. Required."
        ),
    ]
    min_interval_s: Annotated[
        PosFloat | None,
        Meta(description="Shortest interval of the URLs it matches (unset: recrawl's)."),
    ] = None
    max_interval_s: Annotated[
        PosFloat | None,
        Meta(description="Longest interval of the URLs it matches (unset: recrawl's)."),
    ] = None
    initial_interval_s: Annotated[
        PosFloat | None,
        Meta(
            description="First interval of the URLs it matches (unset: recrawl."
            "initial_interval_s clamped to this rule's min and max)."
        ),
    ] = None

    def __post_init__(self) -> None:
        problem = _regex_problem(self.pattern)
        if problem:
            raise ValueError(f"pattern: {problem}")
        lo, hi, first = self.min_interval_s, self.max_interval_s, self.initial_interval_s
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_interval_s: {lo} is more than max_interval_s {hi}")
        low = lo is not None and first is not None and first < lo
        high = hi is not None and first is not None and first > hi
        if low or high:
            raise ValueError(
                f"initial_interval_s: {first} is outside this rule's min_interval_s and "
                "max_interval_s"
            )


class RecrawlSection(_Section, frozen=True):
    """``[recrawl]``: continuous crawling (revisits; frontier/recrawl.py has the policy)."""

    enabled: Annotated[
        bool,
        Meta(
            description="A continuous crawl: every fetched URL is due again after its interval "
            "and the crawl never ends by itself (SIGTERM stops it; the same command resumes "
            "the schedule). false: each URL is fetched once."
        ),
    ] = False
    initial_interval_s: Annotated[
        PosFloat, Meta(description="First revisit this long after a URL's first fetch.")
    ] = 86_400.0
    min_interval_s: Annotated[PosFloat, Meta(description="Shortest interval.")] = 3_600.0
    max_interval_s: Annotated[PosFloat, Meta(description="Longest interval.")] = 2_592_000.0
    unchanged_factor: Annotated[
        Annotated[float, Meta(ge=1, le=100)],
        Meta(
            description="After a visit that found the page unchanged (304, or a 2xx with the "
            "payload digest of the last capture) the interval is multiplied by this (1: fixed)."
        ),
    ] = 1.5
    changed_factor: Annotated[
        Annotated[float, Meta(gt=0, le=1)],
        Meta(
            description="After a visit that found the page changed the interval is multiplied "
            "by this (1: fixed)."
        ),
    ] = 0.5
    revisit_share: Annotated[
        Annotated[float, Meta(ge=0, le=1)],
        Meta(
            description="At most this share of a host's requests go to revisits while the "
            "host also has new URLs queued (all of them when it has none); 0: new URLs first."
        ),
    ] = 0.5
    gone_visits: Annotated[
        NonNegInt,
        Meta(
            description="A URL answering 404 or 410 this many visits in a row leaves the "
            "schedule (0: never); until then its interval grows as if unchanged."
        ),
    ] = 3
    item_time_field: Annotated[
        str,
        Meta(
            description="Spiders: key under which each item gets its page's fetch time (epoch "
            "seconds); empty: none."
        ),
    ] = "fetched_at"
    rules: Annotated[
        tuple[RecrawlRule, ...],
        Meta(description="Interval bounds per part of a site; the first rule that matches wins."),
    ] = ()

    def __post_init__(self) -> None:
        lo, hi, first = self.min_interval_s, self.max_interval_s, self.initial_interval_s
        if lo > hi:
            raise ValueError(f"min_interval_s: {lo} is more than max_interval_s {hi}")
        if not lo <= first <= hi:
            raise ValueError(
                f"initial_interval_s: {first} is outside min_interval_s {lo} .. "
                f"max_interval_s {hi}"
            )
        for i, rule in enumerate(self.rules):
            r_lo = rule.min_interval_s if rule.min_interval_s is not None else lo
            r_hi = rule.max_interval_s if rule.max_interval_s is not None else hi
            if r_lo > r_hi:
                raise ValueError(
                    f"rules: rule {i} ({rule.pattern!r}) has min_interval_s {r_lo} above "
                    f"max_interval_s {r_hi} (an unset one is recrawl's)"
                )


class FeedSection(_Section, frozen=True):
    """One ``[[output.feeds]]`` table: a file the spider's items are appended to."""

    path: Annotated[
        str,
        Meta(
            description="File the items are appended to, relative to output_dir (with worker "
            "processes, to each worker's output_dir/worker-<i>/); never overwritten: a restart "
            "appends, each item exactly once."
        ),
    ] = "items.jsonl"
    format: Annotated[
        Literal["jsonl", "csv"],
        Meta(description="jsonl: one JSON object per line; csv: a header row, then one per item."),
    ] = "jsonl"
    fields: Annotated[
        tuple[str, ...],
        Meta(
            description="csv: the columns, in order (default: the keys of the first item); "
            "other keys are left out (logged once per key), missing ones are empty cells."
        ),
    ] = ()

    def __post_init__(self) -> None:
        problem = feed_path_problem(self.path)
        if problem:
            raise ValueError(f"path: {problem}")
        if self.fields and self.format != "csv":
            raise ValueError("fields: only for format = \"csv\"")
        if len(set(self.fields)) != len(self.fields):
            raise ValueError(f"fields: a column is named twice in {list(self.fields)}")


class OutputSection(_Section, frozen=True):
    warc: Annotated[bool, Meta(description="Write WARC files.")] = True
    warc_max_bytes: Annotated[
        Annotated[int, Meta(ge=1 << 16, le=MAX_COUNT)],
        Meta(description="Rotate WARC files past this size."),
    ] = 1_073_741_824
    warc_prefix: Annotated[str, Meta(description="WARC file name prefix.")] = "frontier-crawl"
    wacz: Annotated[
        bool,
        Meta(
            description="When the crawl completes, package its WARC files (all runs, every "
            "worker) into output_dir/<warc_prefix>.wacz (WACZ 1.1.1: a CDXJ index, "
            "pages.jsonl, datapackage.json), which ReplayWeb.page and pywb open; a stopped "
            "crawl is packaged by 'frontier-crawl wacz'. Needs the wacz extra: pip install "
            "'frontier-crawl[wacz]'. The WACZ holds copies of the WARC files."
        ),
    ] = False
    warc_compressor: Annotated[
        Literal["zlib-ng", "isal"],
        Meta(
            description=(
                "Deflate library for the WARC files' gzip members (standard gzip either way): "
                "isal (Intel ISA-L, level 1: about a sixth of zlib-ng level 6's CPU, files "
                "about 8% larger), or zlib-ng (smaller files for more CPU)."
            )
        ),
    ] = "isal"
    warc_gzip_level: Annotated[
        Annotated[int, Meta(ge=0, le=9)],
        Meta(
            description=(
                "gzip level of WARC records: zlib-ng 1 (fastest) to 9 (smallest), isal 1 to 3; "
                "0: the compressor's default (isal 1, zlib-ng 6)."
            )
        ),
    ] = 0
    progress_interval_s: Annotated[
        NonNegFloat, Meta(description="Seconds between progress lines (0: none).")
    ] = 5.0
    min_free_bytes: Annotated[
        NonNegInt,
        Meta(
            description=(
                "Free-space floor, checked (statvfs, about once a second) on every filesystem "
                "the crawl writes to (output_dir, its state/ and warc/ directories, the HTTP "
                "cache): below it the crawl does what low_space_action says, with a warning "
                "naming the path and the space left; 0 turns the check off. Keep it well above "
                "what the crawl writes in a few seconds: a write that still fails stops the "
                "crawl (exit status 1; the same command resumes)."
            )
        ),
    ] = 1 << 30
    low_space_action: Annotated[
        Literal["pause", "stop"],
        Meta(
            description=(
                "Below min_free_bytes: pause (no new requests, in-flight ones finish; fetching "
                "resumes by itself once every filesystem has min_free_bytes plus a tenth free) "
                "or stop (as on SIGTERM, then exit status 1; the same command resumes)."
            )
        ),
    ] = "pause"
    durability: Annotated[
        Literal["power-loss", "process-crash"],
        Meta(
            description=(
                "What a URL marked done survives. power-loss: its WARC records and crawl-log "
                "line are fsynced (fdatasync) before the commit that marks it done, so an OS "
                "crash or power cut loses nothing committed. process-crash: they are only "
                "handed to the OS first, which survives kill -9 but not an OS crash (the LMDB "
                "state itself is fdatasynced either way)."
            )
        ),
    ] = "power-loss"
    feeds: Annotated[
        tuple[FeedSection, ...],
        Meta(
            description="[[output.feeds]] tables: where a spider's items go. With items and "
            "no feed: output_dir/items.jsonl."
        ),
    ] = ()

    def __post_init__(self) -> None:
        problem = plain_name_problem(self.warc_prefix)
        if problem:
            raise ValueError(f"warc_prefix: {problem}, got {self.warc_prefix!r}")
        paths = [f.path for f in self.feeds]
        parts = [feed_parts(p) for p in paths]
        if len(set(parts)) != len(parts):
            raise ValueError(f"feeds: two feeds share a path ({paths})")
        for i, a in enumerate(parts):
            if a[0].startswith(self.warc_prefix.casefold() + "-") and ".warc" in a[-1]:
                raise ValueError(f"feeds: {paths[i]!r} is named like the crawl's WARC files")
            for j, b in enumerate(parts):
                if i != j and b[: len(a)] == a:
                    raise ValueError(
                        f"feeds: {paths[i]!r} is a file, {paths[j]!r} needs it as a directory"
                    )
        if self.warc_compressor == "isal" and self.warc_gzip_level > 3:
            raise ValueError(
                f"warc_gzip_level: isal has levels 1 to 3 (0: its default), "
                f"got {self.warc_gzip_level}"
            )


class WorkersSection(_Section, frozen=True):
    processes: Annotated[
        Annotated[int, Meta(ge=0, le=256)],
        Meta(
            description="Worker processes, hosts partitioned among them by a stable hash; "
            "0: one per core. Fixed for the life of a crawl."
        ),
    ] = 1
    partition_by: Annotated[
        Literal["host", "registered-domain"],
        Meta(
            description="What the partition hash is taken of: 'host' (the origin), or "
            "'registered-domain' (example.co.uk for www.example.co.uk:8080, by the Public "
            "Suffix List; IP addresses by themselves), so that all hosts of one site share a "
            "partition and politeness.per_ip holds among them across processes and nodes. "
            "Fixed for the life of a crawl."
        ),
    ] = "host"


class ClusterSection(_Section, frozen=True):
    redis_url: Annotated[
        str,
        Meta(
            description="Redis carrying link batches, membership and counters between nodes "
            "(redis://, rediss:// for TLS, unix://; a password in it is never logged). Empty: "
            "no cluster, this machine runs the whole crawl."
        ),
    ] = ""
    nodes: Annotated[
        Annotated[int, Meta(ge=1, le=1024)],
        Meta(
            description="Machines in the crawl, each started with --node 0 .. nodes-1; hosts "
            "are partitioned over nodes x workers.processes. Fixed for the life of a crawl."
        ),
    ] = 1
    key_prefix: Annotated[
        str,
        Meta(description="Prefix of every Redis key of this crawl (several crawls, one Redis)."),
    ] = "frontier-crawl"
    heartbeat_ttl_s: Annotated[
        Annotated[float, Meta(ge=1, le=MAX_SECONDS)],
        Meta(
            description="A node's membership key expires this long after its last heartbeat "
            "(sent every third of it); until then its --node number is refused to others."
        ),
    ] = 15.0
    unreachable_timeout_s: Annotated[
        PosFloat,
        Meta(
            description="How long a node retries (with backoff, logged) while Redis is "
            "unreachable, at start or mid-crawl, or full (maxmemory: refusing writes with no "
            "10 s pause), before it stops with exit status 1 (resumable); meanwhile its status "
            "names Redis (redis-unreachable, redis-full). The report command waits 3 s."
        ),
    ] = 300.0
    max_batch_bytes: Annotated[
        Annotated[int, Meta(ge=4096, le=512 * 1024 * 1024)],
        Meta(
            description="A link batch for another worker or node is at most this many bytes "
            "(and 10,000 links): the links one commit finds for one partition are split into "
            "as many batches as needed, each sent and acknowledged on its own. Keep it well "
            "below Redis's maxmemory: a write larger than the room left is refused."
        ),
    ] = 1_048_576

    def __post_init__(self) -> None:
        if self.redis_url:
            problem = redis_url_problem(self.redis_url)
            if problem:
                raise ValueError(f"redis_url: {problem}")
        if (
            not self.key_prefix
            or any(c.isspace() for c in self.key_prefix)
            or has_controls(self.key_prefix)
        ):
            raise ValueError("key_prefix: must be non-empty, without spaces or control characters")


_LISTEN_RE = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):(?P<port>\d{1,5})$")


class ControlSection(_Section, frozen=True):
    listen: Annotated[
        str,
        Meta(
            description="Address of the control API and dashboard, host:port (e.g. "
            '"127.0.0.1:8740"; port 0: any free port, written to output_dir/control.addr). '
            'Empty: off. A host other than loopback (127.0.0.1, localhost, [::1]) must be '
            "given explicitly and exposes the API (token-protected, plain HTTP) to the network."
        ),
    ] = ""

    def __post_init__(self) -> None:
        if self.listen:
            m = _LISTEN_RE.match(self.listen)
            if m is None or int(m["port"]) > 65535:
                raise ValueError(
                    f'listen: expected "host:port" (e.g. "127.0.0.1:8740"), got {self.listen!r}'
                )


class LoggingSection(_Section, frozen=True):
    """``[logging]``: the crawler's own messages on stderr (per-URL outcomes go to the crawl
    log, crawl.jsonl, not here)."""

    format: Annotated[
        Literal["text", "json"],
        Meta(
            description='text: one line a message, UTC time with its zone first; json: one '
            "JSON object a line (time in UTC, level, logger, message, and the crawl's fields "
            "where a message has them: host, url, outcome), for journald, Loki or jq."
        ),
    ] = "text"
    level: Annotated[
        Literal["debug", "info", "warning", "error"],
        Meta(
            description="The least severe messages shown: info includes the operator's "
            "actions, the control API's address and a resume's queue; the command line's -v "
            "is debug."
        ),
    ] = "info"


class SpiderSection(_Section, frozen=True):
    source: Annotated[
        str | None,
        Meta(
            description="The spider: a Python file (relative to the config file) or an "
            "importable module name; unset: no spider (with [[extract]] rules, the default "
            "spider that follows every link)."
        ),
    ] = None
    class_: Annotated[
        str | None,
        Meta(
            description="Name of the Spider subclass in source; may be unset when source "
            "defines exactly one."
        ),
    ] = msgspec.field(default=None, name="class")
    pipelines: Annotated[
        tuple[str, ...],
        Meta(
            description='Item pipelines, in order: "file.py:ClassName" (file relative to the '
            'config file) or "module:ClassName"; each is instantiated with no arguments.'
        ),
    ] = ()
    renamed_callbacks: Annotated[
        dict[str, str],
        Meta(
            description="Callbacks renamed since queued requests named them, old name = new "
            'name (e.g. {parse_item = "parse_product"}): on resume, a queued request naming '
            "a callback the spider no longer has is refused at start (exit 2) unless mapped "
            "here."
        ),
    ] = msgspec.field(default_factory=dict)
    cookies: Annotated[
        bool,
        Meta(
            description="Keep cookie jars for the spider's requests, as Scrapy does: "
            "Set-Cookie honoured (RFC 6265 domain and path rules), Request(cookies=), meta "
            "dont_merge_cookies and cookiejar; saved with the crawl state, so a resumed crawl "
            "keeps its sessions. Only with spider.source: a crawl without a spider (an "
            "archive crawl) never sends cookies, so each page is archived as a first visit "
            "sees it."
        ),
    ] = True

    def __post_init__(self) -> None:
        if self.class_ is not None and self.source is None:
            raise ValueError("class: needs spider.source")


class ExtractField(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One item field of an ``[[extract]]`` rule, in its table form."""

    css: Annotated[
        str,
        Meta(
            description="CSS selector (selectolax/lexbor syntax), matched in the page, or in "
            "the node of `each` when the rule has one."
        ),
    ]
    attr: Annotated[
        str,
        Meta(
            description="Attribute to take from the matched node (e.g. 'href', "
            "'data-value'); empty: the node's text, all descendants' text joined."
        ),
    ] = ""
    all: Annotated[
        bool,
        Meta(
            description="A list of the values of every matching node (an empty list when none "
            "matches); false: the first match's value, null when none matches."
        ),
    ] = False
    strip: Annotated[
        bool,
        Meta(
            description="Trim the value and collapse every run of whitespace inside it to one "
            "space (as a browser shows text); false: the text exactly as in the page."
        ),
    ] = True
    re: Annotated[
        str,
        Meta(
            description="Regular expression (Python syntax) searched in the value: the value "
            "becomes its first group (the whole match when it has no group), null (or left "
            "out of an `all` list) when it does not match. Empty: the value as it is."
        ),
    ] = ""
    type: Annotated[
        Literal["str", "int", "float"],
        Meta(
            description="Convert the value (after strip and re); a value that does not "
            "convert becomes null (or is left out of an `all` list)."
        ),
    ] = "str"


class ExtractRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[extract]]`` table: pages whose URL matches get items from CSS selectors."""

    url: Annotated[
        str,
        Meta(
            description="Regular expression (Python syntax) searched in the page's final URL "
            "(re.search: anchor it with ^ and $ to match the whole URL). Required."
        ),
    ]
    fields: Annotated[
        dict[str, str | ExtractField],
        Meta(
            description="Item fields, each a CSS selector (the text of the first match) or a "
            "table {css, attr, all, strip, re, type} (keys below). Required, at least one."
        ),
    ]
    each: Annotated[
        str,
        Meta(
            description="CSS selector: one item per matching node (e.g. each product of a "
            "listing page), fields matched inside it; empty: one item per page."
        ),
    ] = ""
    required: Annotated[
        tuple[str, ...],
        Meta(
            description="Fields that must have a value (not null, not an empty string or "
            "list), else the page (or node) gives no item from this rule."
        ),
    ] = ()
    url_field: Annotated[
        str,
        Meta(
            description="Key under which each item gets the page's final URL (unless a field "
            "has that name); empty: no such key."
        ),
    ] = "url"


class CrawlSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The whole crawl.toml."""

    crawl: CrawlSection = CrawlSection()
    scope: ScopeSection = ScopeSection()
    politeness: PolitenessSection = PolitenessSection()
    fetch: FetchSection = FetchSection()
    frontier: FrontierSection = FrontierSection()
    output: OutputSection = OutputSection()
    workers: WorkersSection = WorkersSection()
    control: ControlSection = ControlSection()
    cluster: ClusterSection = ClusterSection()
    spider: SpiderSection = SpiderSection()
    sitemaps: SitemapsSection = SitemapsSection()
    recrawl: RecrawlSection = RecrawlSection()
    logging: LoggingSection = LoggingSection()
    extract: tuple[ExtractRule, ...] = ()


SECTIONS: dict[str, type[_Section]] = {
    "crawl": CrawlSection,
    "scope": ScopeSection,
    "politeness": PolitenessSection,
    "fetch": FetchSection,
    "frontier": FrontierSection,
    "output": OutputSection,
    "workers": WorkersSection,
    "control": ControlSection,
    "cluster": ClusterSection,
    "spider": SpiderSection,
    "sitemaps": SitemapsSection,
    "recrawl": RecrawlSection,
    "logging": LoggingSection,
}


def check_selector(selector: str) -> str | None:
    """Why lexbor (the parser the crawl uses) cannot use this CSS selector; None when it can.

    Compiled against a tiny document: lexbor raises ``SelectolaxError("Can't parse CSS
    selector.")`` for a selector it cannot parse (``span..price``, ``a[``, an empty one), and
    does so on every call, so a selector that passes here cannot fail on a real page.
    """
    from selectolax.lexbor import LexborHTMLParser, SelectolaxError

    if not selector.strip():
        return "empty CSS selector"
    try:
        LexborHTMLParser("<p></p>").css(selector)
    except (SelectolaxError, ValueError, TypeError) as exc:
        return f"invalid CSS selector {selector!r}: {exc}"
    return None


def _regex_problem(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regular expression {pattern!r}: {exc}"
    return None


def check_extract(rules: tuple[ExtractRule, ...]) -> None:
    """Raise ``ValueError("extract[<i>].<key>: <problem>")`` for the first bad rule.

    Checks what the types cannot: regular expressions compile, CSS selectors parse, at least one
    field, ``required`` names fields. ``<i>`` counts the ``[[extract]]`` tables from 0.
    """
    for i, rule in enumerate(rules):
        at = f"extract[{i}]"
        problem = _regex_problem(rule.url)
        if problem:
            raise ValueError(f"{at}.url: {problem}")
        if rule.each and (problem := check_selector(rule.each)):
            raise ValueError(f"{at}.each: {problem}")
        if not rule.fields:
            raise ValueError(f"{at}.fields: at least one field is required")
        for name, spec in rule.fields.items():
            key = f"{at}.fields.{name}"
            if not name:
                raise ValueError(f"{key}: a field needs a name")
            if isinstance(spec, str):
                if problem := check_selector(spec):
                    raise ValueError(f"{key}: {problem}")
                continue
            if problem := check_selector(spec.css):
                raise ValueError(f"{key}.css: {problem}")
            if spec.re and (problem := _regex_problem(spec.re)):
                raise ValueError(f"{key}.re: {problem}")
        for name in rule.required:
            if name not in rule.fields:
                known = ", ".join(rule.fields)
                raise ValueError(f"{at}.required: {name!r} is not a field (fields: {known})")
