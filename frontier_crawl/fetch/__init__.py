"""Fetching: one pycurl CurlMulti driving many transfers (never imports frontier/)."""

from frontier_crawl.fetch.addresses import AddressPolicy
from frontier_crawl.fetch.cache import CacheUnusable
from frontier_crawl.fetch.fetcher import FETCH_TIME_BUCKETS, Fetcher
from frontier_crawl.fetch.types import ErrorKind, FetchRequest, FetchResult, NotModified

__all__ = [
    "FETCH_TIME_BUCKETS",
    "AddressPolicy",
    "CacheUnusable",
    "ErrorKind",
    "FetchRequest",
    "FetchResult",
    "Fetcher",
    "NotModified",
]
