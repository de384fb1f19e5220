"""Spiders: user callbacks per request, items, pipelines and ``[[extract]]`` rules.

The user-facing API is :mod:`frontier_crawl.spider.api` (``Spider``, ``Request``,
``Response``, re-exported by :mod:`frontier_crawl`); the engine talks to this subsystem only
through :class:`~frontier_crawl.spider.host.SpiderHost` (``load``, ``wants``, ``open``, ``run``,
``close``) with the records :class:`Page`, :class:`NewRequest`, :class:`Problem` and
:class:`Yielded`. Imports only config and third-party libraries.
"""

from frontier_crawl.spider.api import Request, Response, Spider
from frontier_crawl.spider.host import NewRequest, Problem, SpiderHost, Yielded
from frontier_crawl.spider.page import Page

__all__ = [
    "NewRequest",
    "Page",
    "Problem",
    "Request",
    "Response",
    "Spider",
    "SpiderHost",
    "Yielded",
]
