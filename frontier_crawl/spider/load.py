"""Load the user's code named in ``[spider]``: the spider class and the item pipelines.

A source is a Python file (the config loader made it absolute, relative to crawl.toml) or an
importable module name (``pkg.spiders``, found on ``sys.path``). A file is imported as a module
named after its stem (``docs_spider.py`` -> ``docs_spider``; a private name when a different
module already has that name), registered in ``sys.modules`` and with its directory appended to
``sys.path`` so it can import the files beside it (appended, so a ``select.py`` there does not
shadow the standard library's for the rest of the crawl). One file imported for the
spider and for a pipeline is imported once.

A Scrapy project is importable as ``scrapy crawl`` makes it: the project root (the nearest
directory above the file holding a ``scrapy.cfg``, else the top of the packages the file is
in, directories with an ``__init__.py``) is appended to ``sys.path`` too, and a file inside
a package there is imported under its dotted name (``myproject.spiders.quotes``), so both
``from myproject.items import QuoteItem`` and ``from ..items import QuoteItem`` work.

Every failure is a :class:`~frontier_crawl.config.ConfigError` whose message starts with the
key (``spider.source``, ``spider.class``, ``spider.pipelines[2]``) and carries the exception's
type and text, so the crawl exits with status 2 before any request.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from frontier_crawl.config import ConfigError, SpiderSection
from frontier_crawl.config.loader import is_source_file
from frontier_crawl.spider.api import Spider

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """One configured pipeline: its config key, the instance and its bound hooks."""

    key: str  # "spider.pipelines[0]"
    name: str  # "ItemsPipeline" (for messages)
    obj: Any
    process_item: Any  # bound process_item(item, response), or (item, spider): see below
    #: Scrapy's signature, process_item(item, spider): its second parameter is named spider
    takes_spider: bool = False


class Crawler:
    """What a Scrapy pipeline's ``from_crawler(crawler)`` gets: ``crawler.spider`` and
    ``crawler.settings`` (the crawl's settings under their Scrapy names, read with ``get``,
    ``getint``, ``getfloat``, ``getbool``; see adopt.MAPPED_SETTINGS)."""

    def __init__(self, spider: Spider, settings: ScrapySettings) -> None:
        self.spider = spider
        self.settings = settings


class ScrapySettings(dict[str, Any]):
    """A read-only view of settings under Scrapy's names."""

    def getint(self, name: str, default: int = 0) -> int:
        return int(self.get(name, default))

    def getfloat(self, name: str, default: float = 0.0) -> float:
        return float(self.get(name, default))

    def getbool(self, name: str, default: bool = False) -> bool:
        value = self.get(name, default)
        return value.lower() in ("1", "true") if isinstance(value, str) else bool(value)

    def getlist(self, name: str, default: list[Any] | None = None) -> list[Any]:
        value = self.get(name, default or [])
        return value.split(",") if isinstance(value, str) else list(value)


def import_source(source: str, key: str) -> ModuleType:
    """Import a file or module; ConfigError naming ``key`` on any failure."""
    if is_source_file(source):
        return _import_file(Path(source), key)
    try:
        return importlib.import_module(source)
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"{key}: cannot import module {source!r}: {_describe(exc)}") from None


def _import_file(path: Path, key: str) -> ModuleType:
    try:
        path = path.resolve(strict=True)
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {str(path)!r}: {_describe(exc)}") from None
    if not path.is_file():
        raise ConfigError(f"{key}: {str(path)!r} is not a file")
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(path):
            return module
    dotted = _project_module(path)
    if dotted is not None:
        try:
            return importlib.import_module(dotted)
        except (Exception, SystemExit) as exc:
            raise ConfigError(
                f"{key}: cannot import {str(path)!r} (as {dotted}): {_describe(exc)}"
            ) from None
    name = path.stem if path.stem.isidentifier() else "_source"
    if name in sys.modules:
        name = f"_frontier_crawl_user_{name}_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{key}: cannot import {str(path)!r}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.append(directory)  # last: a file there cannot shadow an installed module
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise ConfigError(f"{key}: cannot import {str(path)!r}: {_describe(exc)}") from None
    return module


#: how many directories above a source file a scrapy.cfg is looked for
PROJECT_DEPTH = 8


def _project_module(path: Path) -> str | None:
    """The dotted name of a file inside a project's packages (module docstring), with the
    project root appended to ``sys.path``; None for a file to import as a file."""
    cfg_root = next(
        (p for p in list(path.parents)[:PROJECT_DEPTH] if (p / "scrapy.cfg").is_file()), None
    )
    top = path.parent  # the first directory above the packages the file is in
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    root = cfg_root if cfg_root is not None else top
    if str(root) not in sys.path:
        sys.path.append(str(root))  # last: a file there cannot shadow an installed module
    if top != root or top == path.parent:  # not in a package, or not in one at the root
        return None
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts) if all(p.isidentifier() for p in parts) else None


def spider_class(section: SpiderSection) -> type[Spider]:
    """The Spider subclass ``[spider]`` names (``source``, optional ``class``)."""
    assert section.source is not None
    module = import_source(section.source, "spider.source")
    where = getattr(module, "__file__", None) or section.source
    if section.class_ is not None:
        cls = getattr(module, section.class_, None)
        if not (isinstance(cls, type) and issubclass(cls, Spider)):
            found = ", ".join(c.__name__ for c in _own_spiders(module)) or "none"
            what = "no class" if cls is None else "no Spider subclass"
            raise ConfigError(
                f"spider.class: {where} has {what} {section.class_!r} "
                f"(Spider subclasses defined there: {found})"
            )
        return cls
    spiders = _own_spiders(module)
    if len(spiders) == 1:
        return spiders[0]
    if not spiders:
        raise ConfigError(
            f"spider.source: {where} defines no Spider subclass "
            "(class MySpider(frontier_crawl.Spider): ...)"
        )
    names = ", ".join(c.__name__ for c in spiders)
    raise ConfigError(
        f"spider.source: {where} defines several Spider subclasses ({names}); "
        "name one with spider.class"
    )


def _own_spiders(module: ModuleType) -> list[type[Spider]]:
    """Spider subclasses defined in the module itself (not imported there)."""
    return [
        v
        for v in vars(module).values()
        if isinstance(v, type)
        and issubclass(v, Spider)
        and v is not Spider
        and v.__module__ == module.__name__
    ]


def instantiate(cls: type[Any], key: str) -> Any:
    try:
        return cls()
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"{key}: {cls.__name__}() failed: {_describe(exc)}") from None


def pipelines(section: SpiderSection, crawler: Crawler | None = None) -> list[Pipeline]:
    """Import and instantiate the configured pipelines, in order: with ``from_crawler(crawler)``
    when the class has it (Scrapy's), else with no arguments; one raising ``NotConfigured`` is
    left out."""
    from frontier_crawl.spider.api import NotConfigured

    out = []
    for i, entry in enumerate(section.pipelines):
        key = f"spider.pipelines[{i}]"
        source, _, name = entry.rpartition(":")
        module = import_source(source, key)
        cls = getattr(module, name, None)
        if not isinstance(cls, type):
            raise ConfigError(f"{key}: {source} has no class {name!r}")
        factory = getattr(cls, "from_crawler", None)
        scrapy_way = callable(factory) and crawler is not None
        try:
            obj = factory(crawler) if scrapy_way else cls()  # type: ignore[misc]
        except NotConfigured as exc:
            log.info("%s: %s is not configured, left out (%s)", key, name, exc)
            continue
        except (Exception, SystemExit) as exc:
            how = ".from_crawler" if scrapy_way else ""
            raise ConfigError(f"{key}: {name}{how}() failed: {_describe(exc)}") from None
        process = getattr(obj, "process_item", None)
        if not callable(process):
            raise ConfigError(f"{key}: {name} has no process_item(item, response) method")
        out.append(Pipeline(key, name, obj, process, _second_is_spider(process)))
    return out


def _second_is_spider(func: Any) -> bool:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return False
    return len(params) >= 2 and params[1] == "spider"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
