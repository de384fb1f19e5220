"""The engine's one seam to the spider subsystem: :class:`SpiderHost`.

The engine hands over a :class:`Page` per response that :meth:`SpiderHost.wants`; :meth:`run`
calls the callback the page's request named, consumes what it yields, sorts it into validated
:class:`NewRequest` s and items, runs the items through the pipelines and returns all of it with
the :class:`Problem` s met on the way, as a :class:`Yielded`. It never raises into the engine:
user code that fails is a recorded outcome, whatever it raises (``SystemExit``,
``KeyboardInterrupt`` and every other ``BaseException`` included: the crawl's own stop signals
never arrive as exceptions, the engine handles them, so one raised in user code is that code's
failure). The one exception it lets through is :class:`Abandoned`, which
:meth:`SpiderHost.abandon` raises into user code that holds a stop past its deadline.

Outcomes (``Problem.outcome``):

- ``callback-error``: the callback raised (also while its generator is consumed), called
  ``sys.exit``, or raised ``KeyboardInterrupt`` or another ``BaseException``. What it
  yielded *before* the exception is kept, as in Scrapy: those requests and items are as valid
  as they were when yielded, and dropping them would make the crawl depend on where in a
  generator a late error happens.
- ``pipeline-error``: a pipeline's ``process_item`` raised, or returned something that is not
  an item; that item is dropped (the later pipelines do not see it), the others go on.
- ``bad-yield``: the callback yielded something that is neither a Request nor an item (dict,
  dataclass instance, msgspec Struct), an item that does not convert to JSON-able builtins
  (``msgspec.to_builtins``), or a Request whose ``priority`` is not an int.
- ``bad-meta``: a Request's meta is not a dict or does not serialise with msgpack.
- ``unknown-callback``: a Request names a callback (or errback) the spider does not have (also
  a page whose stored callback a changed spider no longer has, which the start-up check,
  :meth:`SpiderHost.check_stored`, refuses for the requests queued here).
- An item JSON cannot hold exactly (NaN, an infinity, a value that does not convert) is a
  ``bad-yield`` at the line that yielded it, or a ``pipeline-error`` at the pipeline that put it
  there; an item a pipeline drops (``DropItem``, or None) is counted in ``Yielded.dropped``.
- ``bad-url``: a Request's URL is not a string, or is not http(s) once resolved against the
  page's URL (by the WHATWG URL Standard, as links are). An absolute ``http(s)://`` URL is
  passed on as written: the frontier's canonicaliser judges it, as it judges every link.

``Problem.where`` is a code location, ``file.py:LINE in Class.method``: for an exception the
innermost frame in the user's code (the spider's and pipelines' directories; else outside the
standard library, site-packages and frontier_crawl), for a bad yield the generator's line where
it was suspended (the ``yield``), else the callback's ``def``. The traceback is given the first
time a location fails and None after, so the crawl log carries each traceback once.

The records are msgspec Structs with ``gc=False`` (none can be part of a reference cycle: they
hold strings, bytes, numbers and lists of such records), so the twenty-odd a page makes add
nothing to the garbage collector's work in a process whose heap is the frontier's.

Timing is wall time (``time.perf_counter``, about 50 ns a call), not CPU time: what a slow
callback costs the crawl is the loop's time, and a callback that blocks (a database insert, a
``time.sleep``) stalls the loop while using no CPU. ``callback_s`` covers the callback, the
consumption of its generator and the ``[[extract]]`` rules; ``pipeline_s`` the pipelines and the
conversion of items to builtins.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import sysconfig
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from types import CodeType, FunctionType, GeneratorType, MethodType, TracebackType
from typing import TYPE_CHECKING, Any

import can_ada
import msgspec

from frontier_crawl.config import ConfigError
from frontier_crawl.config.loader import is_source_file
from frontier_crawl.spider import load
from frontier_crawl.spider.adopt import scrapy_settings
from frontier_crawl.spider.api import (
    ENVELOPE,
    DownloadError,
    DropItem,
    Failure,
    HttpError,
    Request,
    Response,
    Spider,
    StoredCookie,
    origin_of,
    pack_envelope,
    unpack_envelope,
)
from frontier_crawl.spider.cookies import NO_COOKIES, CookieJars, NoCookies
from frontier_crawl.spider.extract import Rules, compile_rules
from frontier_crawl.spider.page import Page
from frontier_crawl.spider.start import overrides_start, start_objects

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings

#: Objects consumed from one callback call at most; the rest is ignored (one bad-yield), so a
#: generator that never ends cannot hang the crawl.
MAX_YIELDS_PER_PAGE = 100_000

log = logging.getLogger(__name__)
_encode_meta = msgspec.msgpack.Encoder().encode
_HTTP = ("http://", "https://")
_HTTP_PROTOCOLS = frozenset(("http:", "https:"))
_perf = time.perf_counter
_END = object()
_HOOKS = frozenset(("open", "close", "start", "start_requests"))
#: the frontier blob holding the callback names queued requests were stored with
CALLBACKS_BLOB = "spider-callbacks"
_decode_names = msgspec.msgpack.Decoder(list[str]).decode


class Abandoned(BaseException):
    """Raised into user code by :meth:`SpiderHost.abandon` (the stop's deadline passed while it
    ran): it unwinds the page being handled, which is left unfinished, to be fetched again on
    resume. A BaseException, so that an ``except Exception`` in user code lets it through."""


class NewRequest(msgspec.Struct, frozen=True, gc=False):
    """One yielded Request, validated by the host."""

    url: str  # absolute http(s) URL (resolved against the page), not yet canonical
    callback: str  # "" for "parse"; always a callback name that exists on the spider
    meta: bytes  # msgpack (b"" for empty)
    priority: int


class Problem(msgspec.Struct, frozen=True, gc=False):
    """A recorded outcome, never an exception to the engine."""

    outcome: str  # "callback-error" | "pipeline-error" | "bad-yield" | "bad-meta" | ...
    where: str  # code location, e.g. "docs_spider.py:12 in DocsSpider.parse_page"
    message: str  # "KeyError: 'from'"
    traceback: str | None  # the formatted traceback the FIRST time this location fails


#: consecutive yielded requests that share callback, meta and priority: (callback, meta,
#: priority, their URLs in yield order), what the engine admits with one ``Frontier.add``
Run = tuple[str, bytes, int, list[str]]


class Yielded(msgspec.Struct, gc=False):
    #: the validated requests, in yield order, as runs (``requests`` has them one by one)
    runs: list[Run]
    items: list[dict[str, Any]]  # after pipelines, converted to JSON-able builtins
    problems: list[Problem]
    callback_s: float  # time in the callback (incl. consuming its generator)
    pipeline_s: float  # time in pipelines for these items
    #: items the pipelines dropped: "Name" (DropItem) or "Name (returned None)" -> count
    dropped: dict[str, int] | None = None

    @property
    def requests(self) -> list[NewRequest]:
        """The requests one by one, in yield order."""
        return [NewRequest(url, cb, meta, prio) for cb, meta, prio, urls in self.runs
                for url in urls]  # fmt: skip


def _is_item(obj: Any) -> bool:
    return isinstance(obj, dict | msgspec.Struct) or (
        dataclasses.is_dataclass(obj) and not isinstance(obj, type)
    )


def _site(code: CodeType, lineno: int | None = None) -> str:
    line = code.co_firstlineno if lineno is None else lineno
    return f"{os.path.basename(code.co_filename)}:{line} in {code.co_qualname}"


def _code_of(func: Any) -> CodeType | None:
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    return code if isinstance(code, CodeType) else None


class _Run:
    """The state of one :meth:`SpiderHost.run` (kept off the host so run() is reentrant)."""

    __slots__ = ("base", "callback", "items", "page", "problems", "runs", "sites")

    def __init__(self, page: Page, callback: Any) -> None:
        self.page = page
        self.callback = callback
        self.runs: list[Run] = []
        self.items: list[Any] = []
        #: where each item came from: (code, line) of the yield, None (the callback's def,
        #: a returned item) or "" (the [[extract]] rules); parallel to items
        self.sites: list[tuple[CodeType, int] | str | None] = []
        self.problems: list[Problem] = []
        self.base: Any = None

    def push(self, new: NewRequest) -> None:
        """A validated request, to the last run if it shares its callback, meta and priority."""
        runs = self.runs
        if runs:
            callback, meta, priority, urls = runs[-1]
            if callback == new.callback and meta == new.meta and priority == new.priority:
                urls.append(new.url)
                return
        runs.append((new.callback, new.meta, new.priority, [new.url]))


class SpiderHost:
    """Runs one spider, its pipelines and the ``[[extract]]`` rules for the engine."""

    def __init__(
        self,
        spider: Spider,
        pipelines: list[load.Pipeline] | tuple[load.Pipeline, ...] = (),
        rules: Rules | None = None,
        user_dirs: tuple[str, ...] = (),
        renamed: dict[str, str] | None = None,
        item_time_field: str = "",
        cookies: NoCookies = NO_COOKIES,
    ) -> None:
        self.spider = spider
        #: the spider's cookie jars (cookies.py; NO_COOKIES: none), which the engine asks for
        #: each request's Cookie header and gives each response's Set-Cookie headers
        self.cookies = cookies
        #: [recrawl] item_time_field: the key each item of a page gets, its fetch time (ISO
        #: 8601, UTC, as the crawl log's ``time``), when the page says when it was fetched
        self._item_time_field = item_time_field
        #: [spider] renamed_callbacks: a stored callback name -> the method it is now
        self._renamed = dict(renamed or {})
        #: callback names stored with queued requests (CALLBACKS_BLOB), and whether this run
        #: added one that is not saved yet (the engine saves it with the requests naming it)
        self._recorded: set[str] = set()
        self.names_changed = False
        self._pipelines = tuple(pipelines)
        self._rules = rules
        self._handle_all, self._handle = _handle_status(type(spider))
        self._handle_by_callback = _callback_handle_status(type(spider))
        self._callbacks: dict[str, Callable[..., Any]] = {}
        # a request's callback (a name, or a bound method of the spider) -> its stored name,
        # for the callbacks seen so far
        self._names: dict[str | MethodType | None, str] = {None: "", "": "", "parse": ""}
        self._default_parse = type(spider).parse is Spider.parse
        #: the default parse and no [[extract]] rules: see follows_links
        self._follows_all = self._default_parse and rules is None
        self._seen_where: set[str] = set()
        self._opened: list[Any] = []
        self._warned_dont_filter = False
        cls_dir = _code_of(type(spider).parse)
        dirs = set(user_dirs)
        if cls_dir is not None and not self._default_parse:
            dirs.add(os.path.dirname(cls_dir.co_filename))
        self._user_dirs = tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs if d))
        self._library_dirs = _library_dirs()
        #: user code (or this host on its behalf) is running: what :meth:`abandon` interrupts
        self.busy = False

    # -- loading -------------------------------------------------------------------------

    @classmethod
    def load(cls, settings: CrawlSettings) -> SpiderHost | None:
        """None when there is neither [spider] nor [[extract]] (the engine keeps today's path).
        Raises frontier_crawl.config.ConfigError (exit 2, before any request) naming the key and
        the error for: a source that fails to import, holds no/several Spider subclasses without
        `class`, a bad class name, a bad pipeline, a bad [[extract]] regex or selector."""
        section = settings.spider
        rule_settings = settings.extract
        if section.source is None and not rule_settings and not section.pipelines:
            return None
        spider_cls = load.spider_class(section) if section.source is not None else Spider
        _handle_status(spider_cls)  # ConfigError now rather than at the first page
        _callback_handle_status(spider_cls)
        spider = load.instantiate(spider_cls, "spider.class")
        crawler = load.Crawler(spider, scrapy_settings(settings))
        for attr, value in (("crawler", crawler), ("settings", crawler.settings)):
            if getattr(spider, attr, None) is None:  # (Scrapy's self.settings.get(...))
                setattr(spider, attr, value)
        pipelines = load.pipelines(section, crawler)
        rules = compile_rules(rule_settings) if rule_settings else None
        dirs = []
        for source in (section.source, *(p.rpartition(":")[0] for p in section.pipelines)):
            if source is not None and is_source_file(source):
                dirs.append(str(Path(source).resolve().parent))
        recrawl = settings.recrawl
        time_field = recrawl.item_time_field if recrawl.enabled else ""
        jars = CookieJars() if section.source is not None and section.cookies else NO_COOKIES
        return cls(spider, pipelines, rules, tuple(dirs), dict(section.renamed_callbacks),
                   time_field, jars)  # fmt: skip

    # -- the seam ------------------------------------------------------------------------

    def check_stored(self, blob: bytes | None, count: Callable[[], dict[str, int]]) -> None:
        """Refuse to start (ConfigError, exit 2) when queued requests name callbacks the spider
        no longer has and ``renamed_callbacks`` does not map: each such name with how many
        queued requests hold it. ``blob``: the names saved by earlier runs (CALLBACKS_BLOB);
        ``count``: queued requests per callback name (a scan, only when a name is missing)."""
        cls = type(self.spider).__name__
        for old, new in self._renamed.items():
            if self._callback(new) is None:
                raise ConfigError(
                    f"spider.renamed_callbacks.{old}: {cls} has no callback {new!r}"
                )
        counts: dict[str, int] | None = None
        if blob is None:  # a crawl from before the names were saved (or a new one): one scan
            counts = count()
            self._recorded = {n for n in counts if n and n[0] != "\x00"}  # (NUL: the crawl's
            # own, never a spider's, such as the sitemaps' callback)
            self.names_changed = bool(self._recorded)
        else:
            self._recorded = set(_decode_names(blob))
        missing = sorted(
            n for n in self._recorded if n not in self._renamed and self._callback(n) is None
        )
        if not missing:
            return
        if counts is None:
            counts = count()
        held = [n for n in missing if counts.get(n)]
        if held:
            listing = ", ".join(f"{n!r} ({counts[n]} queued requests)" for n in held)
            raise ConfigError(
                f"spider.class: queued requests name callbacks {cls} no longer has: {listing}. "
                f"Map each old name to the method it is now in crawl.toml, [spider] "
                f'renamed_callbacks = {{{held[0]} = "new_name"}}, or give {cls} the method '
                "back; nothing was fetched"
            )

    def names_blob(self) -> bytes:
        """The callback names to save (CALLBACKS_BLOB), in the transaction that stores the
        requests naming the new ones."""
        self.names_changed = False
        return _encode_meta(sorted(self._recorded))

    def _record(self, name: str) -> None:
        if name not in self._recorded:
            self._recorded.add(name)
            self.names_changed = True

    def start_requests(self) -> list[NewRequest]:
        """The requests of the spider's ``start()`` / ``start_requests()`` when it overrides
        one ([] otherwise: its ``start_urls`` are seeds already, see adopt.py; the order:
        start.py), validated as a callback's requests; a bad one is a ConfigError (exit 2,
        before any request)."""
        if not overrides_start(type(self.spider)):
            return []
        cls = type(self.spider).__name__
        try:
            self.busy = True
            given = start_objects(self.spider)  # an Exception there: a ConfigError already
        except (Abandoned, ConfigError):
            raise
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: refused as any failure
            message = f"spider.class: {cls}.start() failed: {_describe(exc)}"
            raise ConfigError(message) from None
        finally:
            self.busy = False
        state = _Run(Page("", 200, (), b"", "", None, [], 0, "", b""), self.spider.start)
        out = []
        for req in given:
            new = self._request(state, req, None)
            if new is None:
                problem = state.problems[-1]
                raise ConfigError(f"spider.class: {cls}'s start requests: {problem.message}")
            out.append(new)
        return out

    def wants(self, status: int, callback: str) -> bool:
        """Whether a response with this status goes to the callback (2xx always; 304-confirmed
        pages are 2xx; others only when the spider asks with ``handle_status``: the callback
        method's own attribute if it has one, else the spider class's). robots.txt never
        reaches it."""
        if 200 <= status < 300:
            return True
        if self._handle_by_callback:
            name = callback or "parse"
            own = self._handle_by_callback.get(self._renamed.get(name, name))
            if own is not None:
                return own[0] or status in own[1]
        return self._handle_all or status in self._handle

    def follows_links(self, callback: str) -> bool:
        """Whether a page of a request with this callback goes to the default ``parse`` with no
        ``[[extract]]`` rules: it then yields exactly the page's in-scope links, deduplicated,
        with no callback, meta or priority, and nothing else (no items, so no pipeline, and no
        rule, sees the page). The engine then admits the page's links as the plain path does
        (canonicalised and scoped once, in the frontier's grouped add, the same URLs in the same
        order) and hands :meth:`run` the page without links: nothing would read them."""
        if not self._follows_all:
            return False
        name = callback or "parse"
        return (self._renamed.get(name, name) if self._renamed else name) == "parse"

    def open(self) -> None:
        """Spider.open(), then each pipeline's open(spider); a failure is a ConfigError naming
        the key (the crawl exits with status 2 before its first request)."""
        self.busy = True
        try:
            self._open()
        finally:
            self.busy = False

    def _open(self) -> None:
        try:
            self.spider.open()
        except Abandoned:
            raise
        except BaseException as exc:
            name = type(self.spider).__name__
            raise ConfigError(f"spider.class: {name}.open() failed: {_describe(exc)}") from None
        self._opened.append(self.spider)
        for p in self._pipelines:
            hook = getattr(p.obj, "open_spider", None) or getattr(p.obj, "open", None)
            if callable(hook):
                try:
                    hook(self.spider)
                except Abandoned:
                    self.close()
                    raise
                except BaseException as exc:
                    self.close()
                    message = f"{p.key}: {p.name}.open() failed: {_describe(exc)}"
                    raise ConfigError(message) from None
            self._opened.append(p)

    def close(self) -> None:
        """Each opened pipeline's close(spider), then Spider.close(); never raises (a failure is
        printed to stderr with its traceback; a hook :meth:`abandon` interrupts is left, and
        the next one called)."""
        opened, self._opened = self._opened, []
        busy, self.busy = self.busy, True
        try:
            for thing in reversed(opened):
                self._close(thing)
        finally:
            self.busy = busy

    def _close(self, thing: Any) -> None:
        try:
            if thing is self.spider:
                self.spider.close()
                closed = getattr(self.spider, "closed", None)  # Scrapy's closed(reason)
                if callable(closed):
                    closed("finished")
            else:
                hook = getattr(thing.obj, "close_spider", None) or getattr(thing.obj, "close", None)
                if callable(hook):
                    hook(self.spider)
        except Abandoned:
            print(f"frontier-crawl: close() of {thing!r} left unfinished: the stop's deadline "
                  "passed", file=sys.stderr)  # fmt: skip
        except BaseException:
            print(f"frontier-crawl: error in close() of {thing!r}:", file=sys.stderr)
            traceback.print_exc()

    def abandon(self) -> None:
        """The stop's deadline passed: if user code is running (a callback, a pipeline, a
        hook), raise :class:`Abandoned` into it. The caller is a signal handler of the main
        thread, run between two of the user code's bytecodes or interrupting its blocking call
        (``time.sleep``, a lock's or an Event's wait). The page it handled is left unfinished
        (:meth:`run` raises Abandoned)."""
        if self.busy:
            raise Abandoned("the stop's deadline passed while user code ran")

    def run(self, page: Page, failure: str | None = None) -> Yielded:
        """The callback's requests and the items of the callback and rules, after pipelines.

        ``failure``: the request failed for good (an ErrorKind value, or ``"http"`` for a
        status its callback does not handle): its errback's instead, if it has one.

        Raises :class:`Abandoned` (and nothing else) if :meth:`abandon` interrupted it."""
        self.busy = True
        try:
            return self._run(page) if failure is None else self._errback(page, failure)
        finally:
            self.busy = False

    def _run(self, page: Page) -> Yielded:
        t0 = _perf()
        name = page.callback or "parse"
        if self._renamed:
            name = self._renamed.get(name, name)
        if self._default_parse and name == "parse":
            # Spider.parse yields Request(url) for each link; the links are absolute, canonical
            # and in scope already, so nothing is left to check: one run, the page's links
            runs: list[Run] = [("", b"", 0, page.links)] if page.links else []
            if self._rules is None:
                return Yielded(runs, [], [], _perf() - t0, 0.0)
            state = _Run(page, None)
            state.runs = runs
            response = Response(page)
        else:
            response = Response(page)
            callback = self._callback(name)
            state = _Run(page, callback)
            if callback is None:
                self._problem(
                    state,
                    "unknown-callback",
                    f"{type(self.spider).__qualname__}.{name}",
                    f"the page's request names callback {name!r}, which "
                    f"{type(self.spider).__name__} does not have",
                )
            else:
                self._call(state, callback, response)
        if self._rules is not None:
            self._extract(state, self._rules, response)
        return self._yielded(state, response, t0)

    def _errback(self, page: Page, failure: str) -> Yielded:
        t0 = _perf()
        meta, cb_kwargs, _, name = unpack_envelope(page.meta)
        errback = self._callback(self._renamed.get(name, name)) if name else None
        if errback is None:
            return Yielded([], [], [], 0.0, 0.0)
        response = Response(page)
        value: Exception = HttpError(response) if failure == "http" else DownloadError(
            failure, f"{page.url} failed"
        )  # fmt: skip
        request = Request(page.url, page.callback or "parse", meta, cb_kwargs=cb_kwargs)
        state = _Run(page, errback)
        self._call(state, errback, response, Failure(value, request))
        return self._yielded(state, response, t0)

    def _yielded(self, state: _Run, response: Response, t0: float) -> Yielded:
        """What a callback (or an errback) run gave, its items through the pipelines; ``t0``:
        when the run began (the callback's time is up to now, the pipelines' after)."""
        t1 = _perf()
        if not state.items:
            return Yielded(state.runs, [], state.problems, t1 - t0, 0.0)
        dropped: dict[str, int] = {}
        items = self._pipeline(state, response, dropped)
        if self._item_time_field and state.page.fetched_at:
            key, stamp = self._item_time_field, _iso_time(state.page.fetched_at)
            items = [{**item, key: stamp} for item in items]  # (the feed's form: dicts)
        return Yielded(state.runs, items, state.problems, t1 - t0, _perf() - t1,
                       dropped or None)  # fmt: skip

    # -- callbacks -----------------------------------------------------------------------

    def _callback(self, name: str) -> Callable[..., Any] | None:
        """The bound method a callback name means: a public method of the spider other than
        the ``open``/``close`` hooks; None if there is none."""
        cb = self._callbacks.get(name)
        if cb is None and not name.startswith("_") and name not in _HOOKS:
            attr = getattr(self.spider, name, None)
            if callable(attr) and getattr(attr, "__self__", None) is self.spider:
                cb = self._callbacks[name] = attr
        return cb

    def _call(
        self, state: _Run, callback: Callable[..., Any], response: Response,
        failure: Failure | None = None,
    ) -> None:  # fmt: skip
        it: Iterator[Any] | None = None
        try:
            if failure is not None:
                result = callback(failure)
            elif state.page.meta[:1] == ENVELOPE:
                result = callback(response, **response.cb_kwargs)
            else:
                result = callback(response)
            if result is None:
                return
            if isinstance(result, Request) or _is_item(result):
                self._sort(state, result, None)
                return
            if isinstance(result, str | bytes) or not hasattr(result, "__iter__"):
                self._problem(
                    state,
                    "bad-yield",
                    _site_of(callback, ""),
                    f"returned {type(result).__name__} {_short(result)}: expected an iterable "
                    "(or a generator) of Requests and items, a single one, or None",
                )
                return
            it = iter(result)
            runs = state.runs
            names = self._names
            # the run being filled: its callback, meta, priority and URLs (a request that
            # shares the three joins it; a callback already seen, by name or as a bound method
            # of the spider, is one dict lookup)
            r_cb: str | None = None
            r_meta = b""
            r_priority = 0
            r_urls: list[str] = []
            for obj in islice(it, MAX_YIELDS_PER_PAGE):
                # The common request (a callback already seen, meta absent or a dict, an int
                # priority, an absolute http(s) URL) is checked inline; the rest, and any
                # problem, goes through _request or _sort.
                if type(obj) is Request:
                    cb, url, meta, priority = obj.callback, obj.url, obj.meta, obj.priority
                    name = (
                        "" if cb is None
                        else names.get(cb) if type(cb) is str or type(cb) is MethodType
                        else None
                    )  # fmt: skip
                    if (
                        name is not None
                        and type(priority) is int
                        and type(url) is str
                        and url.startswith(_HTTP)
                        and obj.cb_kwargs is None
                        and obj.headers is None
                        and obj.errback is None
                        and not obj.dont_filter
                        and obj.method == "GET"
                        and obj.body is None
                        and obj.cookies is None
                    ):
                        packed: bytes | None = b""
                        if meta:
                            packed = None
                            if type(meta) is dict:
                                try:
                                    packed = _encode_meta(meta)
                                except (TypeError, ValueError, OverflowError, RecursionError):
                                    packed = None  # _request records it
                        if packed is not None:
                            if name == r_cb and priority == r_priority and packed == r_meta:
                                r_urls.append(url)
                            else:
                                r_cb, r_meta, r_priority, r_urls = name, packed, priority, [url]
                                runs.append((name, packed, priority, r_urls))
                            continue
                    new = self._request(state, obj, it)
                    if new is not None:
                        state.push(new)
                else:
                    self._sort(state, obj, it)
                if runs:  # (_request and _sort may have begun a run)
                    r_cb, r_meta, r_priority, r_urls = runs[-1]
            else:
                if next(it, _END) is not _END:
                    self._problem(
                        state,
                        "bad-yield",
                        self._yield_site(state, it),
                        f"more than {MAX_YIELDS_PER_PAGE} objects from one call; the rest "
                        "is ignored",
                    )
        except Abandoned:
            raise
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the callback's failure
            self._exception(state, "callback-error", exc, callback)
        if isinstance(it, GeneratorType):
            try:
                it.close()  # runs its finally blocks now, not when it is collected
            except Abandoned:
                raise
            except BaseException as exc:  # e.g. "generator ignored GeneratorExit"
                self._exception(state, "callback-error", exc, callback)

    def _sort(self, state: _Run, obj: Any, it: Iterator[Any] | None) -> None:
        if isinstance(obj, Request):
            new = self._request(state, obj, it)
            if new is not None:
                state.push(new)
        elif _is_item(obj):
            state.items.append(obj)
            frame = getattr(it, "gi_frame", None)
            state.sites.append(None if frame is None else (frame.f_code, frame.f_lineno))
        else:
            self._problem(
                state,
                "bad-yield",
                self._yield_site(state, it),
                f"yielded {type(obj).__name__} {_short(obj)}: neither a Request nor an item "
                "(dict, dataclass, msgspec Struct)",
            )

    def _request(self, state: _Run, req: Request, it: Iterator[Any] | None) -> NewRequest | None:
        cb = req.callback
        name = (
            self._names.get(cb) if cb is None or type(cb) is str or type(cb) is MethodType
            else None
        )  # fmt: skip
        if name is None:
            name = self._callback_name(state, req, it)
            if name is None:
                return None
        meta = req.meta
        if req.dont_filter and not self._warned_dont_filter:
            self._warned_dont_filter = True
            log.warning(
                "%s: Request(dont_filter=True) is deduplicated like any request: a URL is "
                "fetched once per crawl (docs: Coming from Scrapy)",
                self._yield_site(state, it),
            )
        if (
            req.cb_kwargs is not None or req.headers is not None or req.errback is not None
            or req.method != "GET" or req.body is not None or req.cookies is not None
        ):  # fmt: skip
            packed_extra = self._envelope(state, req, it)
            if packed_extra is None:
                return None
            packed = packed_extra
        elif not meta:
            packed = b""
        else:
            try:
                if type(meta) is not dict:
                    raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
                packed = _encode_meta(meta)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                self._problem(
                    state,
                    "bad-meta",
                    self._yield_site(state, it),
                    f"Request({_short(req.url)}) meta does not serialise (msgpack): "
                    f"{_describe(exc)}",
                )
                return None
        priority = req.priority
        if type(priority) is not int:
            self._problem(
                state,
                "bad-yield",
                self._yield_site(state, it),
                f"Request({_short(req.url)}) priority must be an int, got {_short(priority)}",
            )
            return None
        url: str | None = req.url
        if type(url) is not str or not url.startswith(_HTTP):
            url = self._resolve(state, url)
            if url is None:
                self._problem(
                    state,
                    "bad-url",
                    self._yield_site(state, it),
                    f"Request({_short(req.url)}): not an http(s) URL once resolved against "
                    f"{state.page.url}",
                )
                return None
        return NewRequest(url, name, packed, priority)

    def _envelope(self, state: _Run, req: Request, it: Iterator[Any] | None) -> bytes | None:
        """The stored meta of a request with cb_kwargs, headers or an errback; None, with a
        problem, if one of them is bad."""
        where = self._yield_site(state, it)
        what = f"Request({_short(req.url)})"
        errback = ""
        if req.errback is not None:
            eb = req.errback
            name = eb if isinstance(eb, str) else getattr(eb, "__name__", None)
            if (
                not isinstance(name, str)
                or not (isinstance(eb, str) or getattr(eb, "__self__", None) is self.spider)
                or self._callback(name) is None
            ):
                message = f"{what} names errback {_short(eb)}, which " \
                    f"{type(self.spider).__name__} does not have"  # fmt: skip
                self._problem(state, "unknown-callback", where, message)
                return None
            errback = name
            self._record(name)
        headers: list[tuple[str, str]] = []
        try:
            if req.meta is not None and type(req.meta) is not dict:
                raise TypeError(f"meta must be a dict, got {type(req.meta).__name__}")
            if req.cb_kwargs is not None and type(req.cb_kwargs) is not dict:
                raise TypeError(f"cb_kwargs must be a dict, got {type(req.cb_kwargs).__name__}")
            if req.headers is not None:
                headers = _headers(req.headers)
            origin = ""
            if headers:
                url = self._resolve(state, req.url)
                origin = origin_of(url) if url is not None else ""
            method, body = _method_and_body(req)
            cookies = _cookies(req.cookies) if req.cookies is not None else None
            return pack_envelope(req.meta, req.cb_kwargs, headers, errback, origin, method,
                                 body, cookies)  # fmt: skip
        except _RefusedHeader as exc:
            self._problem(state, "bad-yield", where, f"{what} headers: {exc}")
        except _BadRequest as exc:
            self._problem(state, "bad-yield", where, f"{what}: {exc}")
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            self._problem(
                state, "bad-meta", where,
                f"{what} meta, cb_kwargs or headers do not serialise (msgpack): "
                f"{_describe(exc)}",
            )  # fmt: skip
        return None

    def _callback_name(self, state: _Run, req: Request, it: Iterator[Any] | None) -> str | None:
        """The stored name of a request's callback (a name or a bound method of the spider);
        None, with an unknown-callback problem, if the spider has no such callback."""
        cb = req.callback
        if cb is None or cb == "" or cb == "parse":
            return ""
        name = cb if isinstance(cb, str) else getattr(cb, "__name__", None)
        if (
            isinstance(name, str)
            and (isinstance(cb, str) or getattr(cb, "__self__", None) is self.spider)
            and self._callback(name) is not None
        ):
            if type(cb) is str or (type(cb) is MethodType and cb == getattr(self.spider, name)):
                # (a bound method of the spider equals every later one of the same method:
                # the same __self__ and __func__, so it is a key as good as its name)
                self._names[cb] = name
            self._record(name)
            return name
        self._problem(
            state,
            "unknown-callback",
            self._yield_site(state, it),
            f"Request({_short(req.url)}) names callback {_short(cb)}, which "
            f"{type(self.spider).__name__} does not have",
        )
        return None

    def _resolve(self, state: _Run, url: Any) -> str | None:
        if type(url) is not str:
            return None
        if url.startswith(_HTTP):
            return url
        try:
            if state.base is None:
                state.base = can_ada.parse(state.page.url)
            resolved = state.base + url
        except ValueError:
            return None
        return resolved.href if resolved.protocol in _HTTP_PROTOCOLS else None

    # -- extraction rules and pipelines --------------------------------------------------

    def _extract(self, state: _Run, rules: Rules, response: Response) -> None:
        """The rules' items for a 2xx HTML page; it is parsed only when a rule's URL matches."""
        page = state.page
        if not (200 <= page.status < 300 and "html" in page.content_type):
            return
        try:
            if rules.matches(page.url):
                found = rules.items(state.page.url, response.tree)
                state.items.extend(found)
                state.sites.extend([""] * len(found))
        except Abandoned:
            raise
        except BaseException as exc:
            self._exception(state, "callback-error", exc, None, fallback="[[extract]] rules")

    def _pipeline(
        self, state: _Run, response: Response, dropped: dict[str, int]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for item, site in zip(state.items, state.sites, strict=True):
            if not (type(item) is dict and _plain(item)):
                bad = _bad_value(item)
                if bad is not None:
                    where = (
                        _site(*site) if isinstance(site, tuple)
                        else "[[extract]] rules" if site == "" else _site_of(state.callback, "")
                    )  # fmt: skip
                    self._problem(state, "bad-yield", where, f"an item holds {bad}")
                    continue
            for p in self._pipelines:
                try:
                    item = p.process_item(item, self.spider if p.takes_spider else response)
                except DropItem as exc:
                    log.debug("%s dropped an item of %s: %s", p.name, state.page.url, exc)
                    dropped[p.name] = dropped.get(p.name, 0) + 1
                    item = None
                    break
                except Abandoned:
                    raise
                except BaseException as exc:  # SystemExit too: the pipeline's failure
                    self._exception(state, "pipeline-error", exc, p.process_item)
                    item = None
                    break
                if item is None:
                    key = f"{p.name} (returned None)"
                    dropped[key] = dropped.get(key, 0) + 1
                    break
                if not _is_item(item):
                    self._problem(
                        state,
                        "pipeline-error",
                        _site_of(p.process_item, p.name),
                        f"{p.name}.process_item returned {type(item).__name__} "
                        f"{_short(item)}: not an item (dict, dataclass, msgspec Struct) nor None",
                    )
                    item = None
                    break
                if not (type(item) is dict and _plain(item)):
                    bad = _bad_value(item)
                    if bad is not None:  # the item was good before this pipeline
                        self._problem(state, "pipeline-error", _site_of(p.process_item, p.name),
                                      f"{p.name}.process_item put {bad} in an item")  # fmt: skip
                        item = None
                        break
            if item is None:
                continue
            if type(item) is not dict or not _plain(item):
                item = msgspec.to_builtins(_sets_sorted(item), str_keys=True)  # _bad_value: ok
            out.append(item)
        return out

    # -- problems ------------------------------------------------------------------------

    def _problem(self, state: _Run, outcome: str, where: str, message: str) -> None:
        state.problems.append(Problem(outcome, where, message, None))

    def _exception(
        self,
        state: _Run,
        outcome: str,
        exc: BaseException,
        func: Any,
        fallback: str = "",
    ) -> None:
        where = self._frame_site(exc.__traceback__) or _site_of(func, fallback)
        tb = None
        if where not in self._seen_where:
            self._seen_where.add(where)
            tb = "".join(traceback.format_exception(exc))
        state.problems.append(Problem(outcome, where, _describe(exc), tb))

    def _frame_site(self, tb: TracebackType | None) -> str | None:
        """The innermost frame in user code (see the module docstring)."""
        user: str | None = None
        other: str | None = None
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if filename.startswith(self._user_dirs):
                user = _site(tb.tb_frame.f_code, tb.tb_lineno)
            elif not filename.startswith(self._library_dirs) and not filename.startswith("<"):
                other = _site(tb.tb_frame.f_code, tb.tb_lineno)
            tb = tb.tb_next
        return user or other

    def _yield_site(self, state: _Run, it: Iterator[Any] | None) -> str:
        frame = getattr(it, "gi_frame", None)
        if frame is not None:
            return _site(frame.f_code, frame.f_lineno)
        return _site_of(state.callback, "")


class _RefusedHeader(ValueError):
    pass


class _BadRequest(ValueError):
    pass


#: an HTTP method token (RFC 9110 5.6.2), upper-cased as sent
_METHOD = re.compile(r"[A-Z][A-Z0-9!#$%&'*+.^_`|~-]*")


def _method_and_body(req: Request) -> tuple[str, bytes]:
    method = req.method
    if type(method) is not str or not _METHOD.fullmatch(method.upper()):
        raise _BadRequest(f"method must be an HTTP method name (GET, POST...), got {method!r}")
    method = method.upper()
    if method == "CONNECT":
        raise _BadRequest("method CONNECT is not sent by a crawler")
    body = req.body
    if body is None:
        return method, b""
    if isinstance(body, str):
        try:
            return method, body.encode(req.encoding)
        except (LookupError, UnicodeError) as exc:
            raise _BadRequest(f"body does not encode with {req.encoding!r}: {exc}") from None
    if isinstance(body, bytes | bytearray | memoryview):
        return method, bytes(body)
    raise _BadRequest(f"body must be bytes or str, got {type(body).__name__}")


def _cookies(given: Any) -> list[StoredCookie]:
    """Request(cookies=): a dict of name -> value, or a list of dicts with name, value and
    optionally domain and path (Scrapy's two forms)."""
    if isinstance(given, Mapping):
        given = [{"name": k, "value": v} for k, v in given.items()]
    elif not isinstance(given, list | tuple):
        raise _BadRequest(f"cookies must be a dict or a list of dicts, got "
                          f"{type(given).__name__}")  # fmt: skip
    out: list[StoredCookie] = []
    for c in given:
        if not isinstance(c, Mapping) or "name" not in c or "value" not in c:
            raise _BadRequest("each of cookies must be a dict with 'name' and 'value'")
        name, value = str(_text(c["name"])), c["value"]
        value = "" if value is None else _text(value) if isinstance(value, bytes) else str(value)
        domain, path = str(c.get("domain") or ""), str(c.get("path") or "")
        if not name or any(ch in name + value for ch in ";\r\n\0") or "=" in name:
            raise _BadRequest(f"cookie {name!r}: a name or value holds '=', ';' or a line break")
        out.append((name, value, domain, path))
    return out


#: request headers a spider may not set: they frame the request or name its target
#: (User-Agent: robots.txt is matched against the configured one; Accept-Encoding: the
#: fetcher decodes what it asked for)
_REFUSED_HEADERS = frozenset(("host", "content-length", "transfer-encoding", "connection",
                              "user-agent", "accept-encoding"))  # fmt: skip


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, str):
        return value
    raise TypeError(f"a header name or value must be str or bytes, got {type(value).__name__}")


def _headers(given: Any) -> list[tuple[str, str]]:
    """A Request's headers as (name, value) pairs of str; a list value is several headers."""
    pairs = given.items() if isinstance(given, Mapping) else given
    out = []
    for name, value in pairs:
        key = _text(name)
        if key.lower() in _REFUSED_HEADERS:
            raise _RefusedHeader(f"{key!r} cannot be set by a spider")
        if not key or any(c in key for c in ":\r\n\0 "):
            raise _RefusedHeader(f"bad header name {key!r}")
        for v in value if isinstance(value, list | tuple) else [value]:
            text = _text(v)
            if any(c in text for c in "\r\n\0"):
                raise _RefusedHeader(f"{key}: a value holds a line break or NUL")
            out.append((key, text))
    return out


def _site_of(func: Any, fallback: str) -> str:
    code = _code_of(func)
    return _site(code) if code is not None else fallback or repr(func)


def _plain(item: dict[Any, Any]) -> bool:
    """Whether a dict is JSON-able builtins already (str keys; str, int, finite float, bool,
    None values), so the common flat item skips a to_builtins copy."""
    return all(
        type(k) is str and type(v) in _PLAIN and (type(v) is not float or v - v == 0.0)
        for k, v in item.items()
    )


def _bad_value(item: Any) -> str | None:
    """What in an item JSON cannot hold exactly (NaN, an infinity, a value msgspec does not
    convert), as ``"price = nan"``; None if it converts. Sets convert (sorted lists)."""
    try:
        value = msgspec.to_builtins(_sets_sorted(item), str_keys=True)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        return f"a value that does not convert to JSON: {_describe(exc)}"
    return _non_finite(value, "")


def _non_finite(value: Any, path: str) -> str | None:
    if type(value) is float:
        return None if value - value == 0.0 else f"{path or 'a value'} = {value!r} (JSON has " \
            "no NaN or infinity)"  # fmt: skip
    if type(value) is dict:
        for k, v in value.items():
            found = _non_finite(v, f"{path}.{k}" if path else k)
            if found is not None:
                return found
    elif type(value) is list:
        for i, v in enumerate(value):
            found = _non_finite(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _sets_sorted(value: Any) -> Any:
    """``value`` with its sets and frozensets (in dicts and lists) made sorted lists (by repr
    when the elements do not order), so a feed line does not depend on hash order."""
    t = type(value)
    if t is set or t is frozenset:
        try:
            return sorted(value)
        except TypeError:
            return sorted(value, key=repr)
    if t is dict:
        return {k: _sets_sorted(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [_sets_sorted(v) for v in value]
    return value


_PLAIN = frozenset((str, int, float, bool, type(None)))


def _library_dirs() -> tuple[str, ...]:
    dirs = {str(Path(__file__).resolve().parent.parent)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


def _callback_handle_status(cls: type[Spider]) -> dict[str, tuple[bool, frozenset[int]]]:
    """Callbacks (methods) with their own ``handle_status`` attribute."""
    out = {}
    for name in dir(cls):
        if name.startswith("_") or name == "handle_status":
            continue
        attr = getattr(cls, name, None)
        if isinstance(attr, FunctionType) and hasattr(attr, "handle_status"):
            out[name] = _handle_status(cls, attr.handle_status, f"{name}.handle_status")
    return out


def _handle_status(
    cls: type[Spider], value: Any = None, attr: str = "handle_status"
) -> tuple[bool, frozenset[int]]:
    if value is None:
        value = cls.handle_status
        if value == () and getattr(cls, "handle_httpstatus_all", False) is True:
            value = "all"  # Scrapy's names
        elif value == () and getattr(cls, "handle_httpstatus_list", None) is not None:
            value, attr = cls.handle_httpstatus_list, "handle_httpstatus_list"  # type: ignore[attr-defined]
    if value == "all":
        return True, frozenset()
    bad = ConfigError(
        f"spider.class: {cls.__name__}.{attr} must be a collection of HTTP status codes "
        f'(ints 100-599, e.g. [404, 410] or range(400, 600)) or "all", got {_short(value)}'
    )
    if isinstance(value, str | bytes):
        raise bad
    try:
        codes = frozenset(value)
    except TypeError:
        raise bad from None
    if not all(type(c) is int and 100 <= c <= 599 for c in codes):
        raise bad
    return False, codes


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _iso_time(epoch_s: float) -> str:
    """``2024-05-01T12:00:00.123Z`` (as the crawl log's ``time``; milliseconds truncated)."""
    seconds, ms = divmod(int(epoch_s * 1000), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"
