"""frontier-crawl: a polite, crash-safe, memory-bounded web crawler engine.

Scrapy's names, for a spider written for Scrapy with ``import frontier_crawl as scrapy``:
``Spider``, ``Request``, ``FormRequest``, ``JsonRequest``, ``Item``, ``Field``; ``Selector``
and ``SelectorList`` are parsel's (``Selector(text=...)``, ``Selector(root=...)``), imported
on first use. Any other name of Scrapy's top-level API (``CrawlSpider``, ``Rule``,
``ItemLoader``...) is an error that names it and says what to use instead
(``frontier_crawl.spider.scrapy_names``), at the import that asks for it.
"""

from typing import Any

from frontier_crawl.spider.api import (
    Field,
    FormRequest,
    Item,
    JsonRequest,
    Request,
    Response,
    Spider,
)

__version__ = "0.1.0"

__all__ = [
    "Field",
    "FormRequest",
    "Item",
    "JsonRequest",
    "Request",
    "Response",
    "Selector",
    "SelectorList",
    "Spider",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in ("Selector", "SelectorList"):
        import parsel

        return getattr(parsel, name)
    from frontier_crawl.spider.scrapy_names import INSTEAD, NotSupported, missing

    if name in INSTEAD:  # (an ImportError: ``from frontier_crawl import Rule`` shows it too)
        raise NotSupported(missing(name, __name__))
    raise AttributeError(missing(name, __name__))
