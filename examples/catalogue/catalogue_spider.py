"""A two-level spider for the demo shop: the index -> every listing page -> every product.

Each request names the callback for its level and carries what the next level needs in
``meta`` (the category and the listing page that lists the product), so an item can hold what
its own page does not say. Run with ``crawl.toml`` next to this file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from frontier_crawl import Request, Response, Spider


def _text(response: Response, selector: str) -> str | None:
    node = response.css_first(selector)
    return None if node is None else " ".join(node.text().split())


class CatalogueSpider(Spider):
    def parse(self, response: Response) -> Iterator[Request]:
        """The shop's index (the seed): one listing per category."""
        for link in response.css("a.category"):
            category = " ".join(link.text().split())
            yield Request(
                link.attributes["href"] or "",
                callback="parse_listing",
                meta={"category": category},
            )

    def parse_listing(self, response: Response) -> Iterator[Request]:
        """A listing page: its products, then the next page of the same category."""
        for link in response.css("li.product a.product-link"):
            yield Request(
                link.attributes["href"] or "",  # relative ones are resolved against the page
                callback="parse_product",
                meta={"category": response.meta["category"], "listing": response.url},
            )
        following = response.css_first("a.next")
        if following is not None:
            yield Request(
                following.attributes["href"] or "",
                callback="parse_listing",
                meta=response.meta,
            )

    def parse_product(self, response: Response) -> Iterator[dict[str, Any]]:
        """A product page: one item."""
        price = response.css_first("span.price")
        value = None if price is None else price.attributes.get("data-value")
        yield {
            "url": response.url,
            "name": _text(response, "h1.product-name"),
            "price": None if value is None else float(value),  # sold out: no data-value
            "sku": _text(response, "span.sku"),
            "category": response.meta["category"],
            "listing": response.meta["listing"],
            "tags": [" ".join(li.text().split()) for li in response.css("ul.tags li")],
            "description": _text(response, "div.description"),
        }
