"""frontier-crawl: a polite, crash-safe, memory-bounded web crawler engine."""

from frontier_crawl.spider.api import (
    Field,
    FormRequest,
    Item,
    JsonRequest,
    Request,
    Response,
    Spider,
)
from frontier_crawl.spider.select import Selector, SelectorList

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
