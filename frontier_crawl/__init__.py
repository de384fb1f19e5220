"""frontier-crawl: a polite, crash-safe, memory-bounded web crawler engine."""

from frontier_crawl.spider.api import Request, Response, Spider

__version__ = "0.1.0"

__all__ = ["Request", "Response", "Spider", "__version__"]
