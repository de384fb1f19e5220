"""A spider's start requests, in Scrapy 2.13's order.

Scrapy 2.13 starts a crawl from ``Spider.start()``, an asynchronous generator; its default
implementation iterates ``start_requests()`` (the older, synchronous name), whose default
yields a request for each of ``start_urls``. So:

- a spider that overrides ``start()`` (``async def start(self)`` with ``yield``, or a plain
  ``def start(self)`` returning an iterable) starts from it, and its ``start_requests()`` is
  not called unless ``start()`` calls it (``super().start()`` does);
- a spider that overrides only ``start_requests()`` starts from it;
- a spider that overrides neither starts from ``start_urls`` (which are then plain seeds:
  ``adopt.py``).

``start()`` runs to its end once per worker process, before the first request (an
asynchronous one in its own event loop, ``asyncio.run``), and what it yields must be
requests: an item there (Scrapy 2.13 allows them) is refused naming the spider, as is a
``start()`` that is a coroutine without ``yield``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Any

from frontier_crawl.config import ConfigError
from frontier_crawl.spider.api import Request, Spider

__all__ = ["overrides_start", "start_objects"]


def overrides_start(cls: type[Spider]) -> bool:
    """Whether the spider starts from anything but its ``start_urls``."""
    return (
        getattr(cls, "start", None) is not Spider.start
        or getattr(cls, "start_requests", None) is not Spider.start_requests
    )


async def _collect(agen: AsyncIterator[Any]) -> list[Any]:
    return [obj async for obj in agen]


def start_objects(spider: Spider) -> list[Request]:
    """Everything the spider's ``start()`` yields (module docstring); ConfigError naming the
    method if it fails or yields something that is not a Request."""
    cls = type(spider).__name__
    if not getattr(type(spider), "start_urls", ()) and hasattr(spider, "start_url"):
        raise ConfigError(  # Scrapy's own check, as an error before any request
            f"spider.class: {cls} has no start_urls but a start_url attribute: did you miss "
            "an 's'? (start_urls = [...])"
        )
    which = "start()" if type(spider).start is not Spider.start else "start_requests()"
    try:
        result: Any = spider.start()
        if inspect.isasyncgen(result):
            objects = asyncio.run(_collect(result))
        elif inspect.iscoroutine(result):
            result.close()
            raise TypeError(
                "start() is a coroutine without yield: make it an asynchronous generator "
                "(async def start(self): yield Request(...)) or return an iterable"
            )
        elif result is None:
            objects = []
        else:
            objects = list(result)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"spider.class: {cls}.{which} failed: {type(exc).__name__}: {exc}"
        ) from None
    for obj in objects:
        if not isinstance(obj, Request):
            kind = "an item" if isinstance(obj, dict) else type(obj).__name__
            raise ConfigError(
                f"spider.class: {cls}.{which} yielded {kind} ({_short(obj)}): only Requests "
                "are taken at the start; yield items from a callback"
            )
    return objects


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
