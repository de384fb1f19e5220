"""Spiders: user callbacks per request, items, pipelines and ``[[extract]]`` rules.

The user-facing API is :mod:`frontier_crawl.spider.api` (``Spider``, ``Request``,
``Response``, re-exported by :mod:`frontier_crawl`); the engine talks to this subsystem only
through :class:`~frontier_crawl.spider.host.SpiderHost` (``load``, ``check_stored``,
``start_requests``, ``wants``, ``open``, ``run``, ``names_blob``, ``close``, ``abandon``)
with the records
:class:`Page`, :class:`NewRequest`, :class:`Problem` and :class:`Yielded`, and
:func:`~frontier_crawl.spider.adopt.adopt` (the spider's start URLs, ``allowed_domains`` and
``custom_settings`` made part of the settings, where the config is loaded). Scrapy's API:
docs/scrapy.md. Imports only config and third-party libraries.
"""

from frontier_crawl.spider.api import Request, Response, Spider
from frontier_crawl.spider.host import Abandoned, NewRequest, Problem, SpiderHost, Yielded
from frontier_crawl.spider.page import Page

__all__ = [
    "Abandoned",
    "NewRequest",
    "Page",
    "Problem",
    "Request",
    "Response",
    "Spider",
    "SpiderHost",
    "Yielded",
]
