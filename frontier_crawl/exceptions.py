"""Scrapy's exception names a spider or pipeline raises (``from frontier_crawl.exceptions
import DropItem``, as ``from scrapy.exceptions import DropItem``)."""

from frontier_crawl.spider.api import (
    CloseSpider,
    DownloadError,
    DropItem,
    Failure,
    HttpError,
    IgnoreRequest,
    NotConfigured,
)

__all__ = [
    "CloseSpider",
    "DownloadError",
    "DropItem",
    "Failure",
    "HttpError",
    "IgnoreRequest",
    "NotConfigured",
]
