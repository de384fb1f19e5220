"""Fetching: one pycurl CurlMulti driving many transfers (never imports frontier/)."""

from frontier_crawl.fetch.cache import CacheUnusable
from frontier_crawl.fetch.fetcher import Fetcher
from frontier_crawl.fetch.types import ErrorKind, FetchRequest, FetchResult, NotModified

__all__ = ["CacheUnusable", "ErrorKind", "FetchRequest", "FetchResult", "Fetcher", "NotModified"]
