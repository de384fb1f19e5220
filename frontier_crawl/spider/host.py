"""The engine's one seam to the spider subsystem: :class:`SpiderHost`.

The engine hands over a :class:`Page` per response that :meth:`SpiderHost.wants`; :meth:`run`
calls the callback the page's request named, consumes what it yields, sorts it into validated
:class:`NewRequest` s and items, runs the items through the pipelines and returns all of it with
the :class:`Problem` s met on the way, as a :class:`Yielded`. It never raises into the engine
(KeyboardInterrupt and SystemExit excepted): user code that fails is a recorded outcome.

Outcomes (``Problem.outcome``):

- ``callback-error``: the callback raised (also while its generator is consumed). What it
  yielded *before* the exception is kept, as in Scrapy: those requests and items are as valid
  as they were when yielded, and dropping them would make the crawl depend on where in a
  generator a late error happens.
- ``pipeline-error``: a pipeline's ``process_item`` raised, or returned something that is not
  an item; that item is dropped (the later pipelines do not see it), the others go on.
- ``bad-yield``: the callback yielded something that is neither a Request nor an item (dict,
  dataclass instance, msgspec Struct), an item that does not convert to JSON-able builtins
  (``msgspec.to_builtins``), or a Request whose ``priority`` is not an int.
- ``bad-meta``: a Request's meta is not a dict or does not serialise with msgpack.
- ``unknown-callback``: a Request names a callback the spider does not have (also a page whose
  stored callback a changed spider no longer has).
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
import os
import sys
import sysconfig
import time
import traceback
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from types import CodeType, FunctionType, GeneratorType, TracebackType
from typing import TYPE_CHECKING, Any

import can_ada
import msgspec

from frontier_crawl.config import ConfigError
from frontier_crawl.config.loader import is_source_file
from frontier_crawl.spider import load
from frontier_crawl.spider.api import Request, Response, Spider
from frontier_crawl.spider.extract import Rules, compile_rules
from frontier_crawl.spider.page import Page

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings

#: Objects consumed from one callback call at most; the rest is ignored (one bad-yield), so a
#: generator that never ends cannot hang the crawl.
MAX_YIELDS_PER_PAGE = 100_000

_encode_meta = msgspec.msgpack.Encoder().encode
_HTTP = ("http://", "https://")
_HTTP_PROTOCOLS = frozenset(("http:", "https:"))
_perf = time.perf_counter
_END = object()
_HOOKS = frozenset(("open", "close"))


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


class Yielded(msgspec.Struct, gc=False):
    requests: list[NewRequest]
    items: list[dict[str, Any]]  # after pipelines, converted to JSON-able builtins
    problems: list[Problem]
    callback_s: float  # time in the callback (incl. consuming its generator)
    pipeline_s: float  # time in pipelines for these items


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

    __slots__ = ("base", "callback", "items", "page", "problems", "requests")

    def __init__(self, page: Page, callback: Any) -> None:
        self.page = page
        self.callback = callback
        self.requests: list[NewRequest] = []
        self.items: list[Any] = []
        self.problems: list[Problem] = []
        self.base: Any = None


class SpiderHost:
    """Runs one spider, its pipelines and the ``[[extract]]`` rules for the engine."""

    def __init__(
        self,
        spider: Spider,
        pipelines: list[load.Pipeline] | tuple[load.Pipeline, ...] = (),
        rules: Rules | None = None,
        user_dirs: tuple[str, ...] = (),
    ) -> None:
        self.spider = spider
        self._pipelines = tuple(pipelines)
        self._rules = rules
        self._handle_all, self._handle = _handle_status(type(spider))
        self._handle_by_callback = _callback_handle_status(type(spider))
        self._callbacks: dict[str, Callable[..., Any]] = {}
        # a request's callback -> its stored name, for the callbacks seen so far
        self._names: dict[str | None, str] = {None: "", "": "", "parse": ""}
        self._default_parse = type(spider).parse is Spider.parse
        self._seen_where: set[str] = set()
        self._opened: list[Any] = []
        cls_dir = _code_of(type(spider).parse)
        dirs = set(user_dirs)
        if cls_dir is not None and not self._default_parse:
            dirs.add(os.path.dirname(cls_dir.co_filename))
        self._user_dirs = tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs if d))
        self._library_dirs = _library_dirs()

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
        pipelines = load.pipelines(section)
        rules = compile_rules(rule_settings) if rule_settings else None
        dirs = []
        for source in (section.source, *(p.rpartition(":")[0] for p in section.pipelines)):
            if source is not None and is_source_file(source):
                dirs.append(str(Path(source).resolve().parent))
        return cls(spider, pipelines, rules, tuple(dirs))

    # -- the seam ------------------------------------------------------------------------

    def wants(self, status: int, callback: str) -> bool:
        """Whether a response with this status goes to the callback (2xx always; 304-confirmed
        pages are 2xx; others only when the spider asks with ``handle_status``: the callback
        method's own attribute if it has one, else the spider class's). robots.txt never
        reaches it."""
        if 200 <= status < 300:
            return True
        if self._handle_by_callback:
            own = self._handle_by_callback.get(callback or "parse")
            if own is not None:
                return own[0] or status in own[1]
        return self._handle_all or status in self._handle

    def open(self) -> None:
        """Spider.open(), then each pipeline's open(spider); a failure is a ConfigError naming
        the key (the crawl exits with status 2 before its first request)."""
        try:
            self.spider.open()
        except Exception as exc:
            name = type(self.spider).__name__
            raise ConfigError(f"spider.class: {name}.open() failed: {_describe(exc)}") from None
        self._opened.append(self.spider)
        for p in self._pipelines:
            hook = getattr(p.obj, "open", None)
            if callable(hook):
                try:
                    hook(self.spider)
                except Exception as exc:
                    self.close()
                    message = f"{p.key}: {p.name}.open() failed: {_describe(exc)}"
                    raise ConfigError(message) from None
            self._opened.append(p)

    def close(self) -> None:
        """Each opened pipeline's close(spider), then Spider.close(); never raises (a failure is
        printed to stderr with its traceback)."""
        opened, self._opened = self._opened, []
        for thing in reversed(opened):
            try:
                if thing is self.spider:
                    self.spider.close()
                else:
                    hook = getattr(thing.obj, "close", None)
                    if callable(hook):
                        hook(self.spider)
            except Exception:
                print(f"frontier-crawl: error in close() of {thing!r}:", file=sys.stderr)
                traceback.print_exc()

    def run(self, page: Page) -> Yielded:
        """The callback's requests and the items of the callback and rules, after pipelines."""
        t0 = _perf()
        name = page.callback or "parse"
        if self._default_parse and name == "parse":
            # Spider.parse yields Request(url) for each link; the links are absolute, canonical
            # and in scope already, so nothing is left to check.
            requests = [NewRequest(url, "", b"", 0) for url in page.links]
            if self._rules is None:
                return Yielded(requests, [], [], _perf() - t0, 0.0)
            state = _Run(page, None)
            state.requests = requests
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
        t1 = _perf()
        items = self._pipeline(state, response) if state.items else []
        return Yielded(state.requests, items, state.problems, t1 - t0, _perf() - t1)

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

    def _call(self, state: _Run, callback: Callable[..., Any], response: Response) -> None:
        it: Iterator[Any] | None = None
        try:
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
            append = state.requests.append
            names = self._names
            for obj in islice(it, MAX_YIELDS_PER_PAGE):
                # The common request (a callback already seen, meta absent or a dict, an int
                # priority, an absolute http(s) URL) is checked inline; the rest, and any
                # problem, goes through _request or _sort.
                if type(obj) is Request:
                    cb, url, meta, priority = obj.callback, obj.url, obj.meta, obj.priority
                    name = "" if cb is None else names.get(cb) if type(cb) is str else None
                    if (
                        name is not None
                        and type(priority) is int
                        and type(url) is str
                        and url.startswith(_HTTP)
                    ):
                        if not meta:
                            append(NewRequest(url, name, b"", priority))
                            continue
                        if type(meta) is dict:
                            try:
                                append(NewRequest(url, name, _encode_meta(meta), priority))
                                continue
                            except (TypeError, ValueError, OverflowError):
                                pass  # _request records it
                    new = self._request(state, obj, it)
                    if new is not None:
                        append(new)
                else:
                    self._sort(state, obj, it)
            else:
                if next(it, _END) is not _END:
                    self._problem(
                        state,
                        "bad-yield",
                        self._yield_site(state, it),
                        f"more than {MAX_YIELDS_PER_PAGE} objects from one call; the rest "
                        "is ignored",
                    )
        except Exception as exc:
            self._exception(state, "callback-error", exc, callback)
        if isinstance(it, GeneratorType):
            try:
                it.close()  # runs its finally blocks now, not when it is collected
            except Exception as exc:  # e.g. "generator ignored GeneratorExit"
                self._exception(state, "callback-error", exc, callback)

    def _sort(self, state: _Run, obj: Any, it: Iterator[Any] | None) -> None:
        if isinstance(obj, Request):
            new = self._request(state, obj, it)
            if new is not None:
                state.requests.append(new)
        elif _is_item(obj):
            state.items.append(obj)
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
        name = self._names.get(cb) if cb is None or type(cb) is str else None
        if name is None:
            name = self._callback_name(state, req, it)
            if name is None:
                return None
        meta = req.meta
        if not meta:
            packed = b""
        else:
            try:
                if type(meta) is not dict:
                    raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
                packed = _encode_meta(meta)
            except (TypeError, ValueError, OverflowError) as exc:
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
            if isinstance(cb, str):
                self._names[cb] = name
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
                state.items.extend(rules.items(state.page.url, response.tree))
        except Exception as exc:
            self._exception(state, "callback-error", exc, None, fallback="[[extract]] rules")

    def _pipeline(self, state: _Run, response: Response) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for item in state.items:
            for p in self._pipelines:
                try:
                    item = p.process_item(item, response)
                except Exception as exc:
                    self._exception(state, "pipeline-error", exc, p.process_item)
                    item = None
                    break
                if item is None:
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
            if item is None:
                continue
            if type(item) is not dict or not _plain(item):
                try:
                    item = msgspec.to_builtins(item, str_keys=True)
                except (TypeError, ValueError, OverflowError) as exc:
                    self._problem(
                        state,
                        "bad-yield",
                        _site_of(state.callback, "[[extract]] rules"),
                        f"an item does not convert to JSON-able values: {_describe(exc)}",
                    )
                    continue
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


def _site_of(func: Any, fallback: str) -> str:
    code = _code_of(func)
    return _site(code) if code is not None else fallback or repr(func)


def _plain(item: dict[Any, Any]) -> bool:
    """Whether a dict is JSON-able builtins already (str keys; str, int, float, bool, None
    values), so the common flat item skips a to_builtins copy."""
    return all(type(k) is str and type(v) in _PLAIN for k, v in item.items())


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
