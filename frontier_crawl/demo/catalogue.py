"""A shop catalogue inside the demo web: listing pages with pagination, product detail pages.

Built from ``random.Random(f"{seed}/shop")`` alone, so the rest of the site does not change
when the catalogue is added. It lives on host 0 under ``/shop/`` and exists only when
``SiteSpec.products > 0`` (then host 0's ``/`` links to ``/shop/``):

- ``/shop/``: the index, one link per category (``a.category``);
- ``/shop/<category>/`` and ``/shop/<category>/page-<n>.html`` (n >= 2): a listing of
  ``products_per_page`` products, each ``li.product`` with ``a.product-link`` (written
  root-relative, relative ``../item/<n>.html`` or absolute, by turns) and ``span.price``; the
  pagination has ``a.prev``, numbered ``a.page`` links and ``a.next`` (``rel="next"``);
- ``/shop/item/<n>.html``: a product: ``h1.product-name`` (padded with whitespace, names with
  ``&`` and accents), ``span.price`` with ``data-value`` (a tenth are sold out: no
  ``data-value``, text "sold out"), ``span.sku``, ``a.category`` in the breadcrumb,
  ``ul.tags li``, ``div.description`` (a fifth of the products have 20 to 40 KB of it), and
  ``a.related`` links to three other products.

:meth:`Catalogue.products` is the ground truth an extraction must give, field by field, as the
text a browser shows (whitespace collapsed, entities decoded).
"""

from __future__ import annotations

import html
import random
from dataclasses import dataclass

__all__ = ["Catalogue", "Product"]

SHOP = "/shop/"
_PORT = "{port}"

_CATEGORIES = (
    "Garden & Outdoor", "Kitchen", "Tools", "Books", "Toys & Games", "Café Supplies",
    "Lighting", "Office", "Bicycles", "Music",
)  # fmt: skip
_ADJECTIVES = (
    "Sturdy", "Compact", "Deluxe", "Rustic", "Crème", "Folding", "Electric", "Vintage",
    "Ergonomic", "Stainless", "Handmade", "Portable", "Quiet", "Smart", "Heavy-duty",
)  # fmt: skip
_NOUNS = (
    "Lamp", "Kettle", "Wrench", "Notebook", "Chair", "Grinder", "Hose", "Puzzle", "Bell",
    "Shelf", "Saddle", "Speaker", "Trowel", "Mug", "Stapler", "Drum", "Pump", "Ladder",
    "Salt & Pepper Mill", "Tea Set <3-piece>",
)  # fmt: skip
_TAGS = ("new", "sale", "eco", "bestseller", "limited", "gift", "refurbished", "bundle")
_WORDS = (
    "durable", "steel", "oak", "handle", "finish", "weight", "size", "colour", "warranty",
    "design", "comfort", "grip", "battery", "cable", "surface", "coating", "package",
    "quality", "daily", "use", "easy", "clean", "store", "light", "strong", "classic",
)  # fmt: skip
_SOLD_OUT_P = 0.1
_LONG_P = 0.2  #: a description of 20 to 40 KB (else 300 to 2000 bytes)


@dataclass(frozen=True, slots=True)
class Product:
    """One product as the generator knows it (``price`` None: sold out)."""

    number: int
    name: str
    price: float | None
    sku: str
    category: str
    tags: tuple[str, ...]
    description: tuple[str, ...]  #: paragraphs
    related: tuple[int, ...]  #: numbers of other products

    @property
    def path(self) -> str:
        return f"{SHOP}item/{self.number}.html"


def _slug(category: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in category.lower()).replace("--", "-")


class Catalogue:
    """The products, categories and listing pages of the shop; renders its pages."""

    def __init__(self, host: str, products: int, per_page: int, categories: int, seed: int):
        self.host = host
        self.per_page = per_page
        rng = random.Random(f"{seed}/shop")
        self.categories = list(_CATEGORIES[: max(1, min(categories, len(_CATEGORIES)))])
        self.slugs = {c: _slug(c) for c in self.categories}
        names: set[str] = set()
        items: list[Product] = []
        for number in range(1, products + 1):
            name = f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}"
            if name in names:
                name = f"{name} {number}"
            names.add(name)
            sold_out = rng.random() < _SOLD_OUT_P
            price = None if sold_out else rng.randint(199, 99_999) / 100
            size = rng.randint(20_000, 40_000) if rng.random() < _LONG_P else rng.randint(300, 2000)
            words = rng.choices(_WORDS, k=size // 7)
            paragraphs = tuple(" ".join(words[i : i + 50]) + "." for i in range(0, len(words), 50))
            related = tuple(rng.sample(range(1, products + 1), min(3, products)))
            items.append(
                Product(
                    number=number,
                    name=name,
                    price=price,
                    sku=f"FC-{number:05d}",
                    category=rng.choice(self.categories),
                    tags=tuple(rng.sample(_TAGS, rng.randint(0, 3))),
                    description=paragraphs,
                    related=tuple(r for r in related if r != number),
                )
            )
        self.products = items
        self.by_path = {p.path: p for p in items}
        #: category -> its products in listing order (by number)
        self.listed = {c: [p for p in items if p.category == c] for c in self.categories}
        self._page_of = {
            p.number: i // per_page + 1
            for c in self.categories
            for i, p in enumerate(self.listed[c])
        }
        self._listings = {
            self.listing_path(c, n): (c, n)
            for c in self.categories
            for n in range(1, self.pages_of(c) + 1)
        }

    # -- paths ------------------------------------------------------------------------------------

    def listing_path(self, category: str, page: int) -> str:
        base = f"{SHOP}{self.slugs[category]}/"
        return base if page == 1 else f"{base}page-{page}.html"

    def pages_of(self, category: str) -> int:
        return max(1, -(-len(self.listed[category]) // self.per_page))

    def listings(self) -> dict[str, tuple[str, int]]:
        """Listing path -> (category, page number)."""
        return dict(self._listings)

    def on_page(self, category: str, page: int) -> list[Product]:
        start = (page - 1) * self.per_page
        return self.listed[category][start : start + self.per_page]

    def links(self) -> dict[str, list[str]]:
        """Every catalogue path -> the catalogue paths it links to (for the site's link graph)."""
        out: dict[str, list[str]] = {SHOP: [self.listing_path(c, 1) for c in self.categories]}
        for path, (category, page) in self.listings().items():
            targets = [SHOP]
            targets += [p.path for p in self.on_page(category, page)]
            targets += [
                self.listing_path(category, n) for n in range(1, self.pages_of(category) + 1)
            ]
            out[path] = targets
        for product in self.products:
            out[product.path] = [SHOP, self.listing_path(product.category, 1)] + [
                f"{SHOP}item/{r}.html" for r in product.related
            ]
        return out

    # -- rendering --------------------------------------------------------------------------------

    def render(self, path: str, port: int) -> bytes | None:
        """The HTML of a catalogue page, None when ``path`` is none."""
        if path == SHOP:
            return self._index()
        product = self.by_path.get(path)
        if product is not None:
            return self._detail(product)
        listing = self._listings.get(path)
        if listing is not None:
            return self._listing(*listing, port=port)
        return None

    @staticmethod
    def _page(title: str, body: list[str]) -> bytes:
        head = (
            '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title></head>\n<body>\n"
        )
        return (head + "".join(body) + "</body>\n</html>\n").encode()

    def _index(self) -> bytes:
        body = ['<h1>Catalogue</h1>\n<ul class="categories">\n']
        for c in self.categories:
            href = html.escape(self.listing_path(c, 1))
            body.append(f'<li><a class="category" href="{href}">{html.escape(c)}</a></li>\n')
        body.append('</ul>\n<p><a href="/">home</a></p>\n')
        return self._page("Catalogue", body)

    def _listing(self, category: str, page: int, port: int) -> bytes:
        last = self.pages_of(category)
        body = [
            f'<nav class="breadcrumb"><a href="{SHOP}">Shop</a> &rsaquo; '
            f"{html.escape(category)}</nav>\n",
            f'<h1 class="category-name">{html.escape(category)}</h1>\n<ul class="products">\n',
        ]
        for i, product in enumerate(self.on_page(category, page)):
            style = i % 3
            if style == 0:
                href = product.path
            elif style == 1:  # the listing's directory is /shop/<category>/
                href = f"../item/{product.number}.html"
            else:
                href = f"http://{self.host}:{port}{product.path}"
            price = "sold out" if product.price is None else f"&euro;{product.price:.2f}"
            body.append(
                f'<li class="product"><a class="product-link" href="{html.escape(href)}">'
                f'{html.escape(product.name)}</a> <span class="price">{price}</span></li>\n'
            )
        body.append('</ul>\n<nav class="pagination">\n')
        if page > 1:
            prev = self.listing_path(category, page - 1)
            body.append(f'<a class="prev" rel="prev" href="{prev}">previous</a>\n')
        for n in range(1, last + 1):
            current = ' aria-current="page"' if n == page else ""
            body.append(
                f'<a class="page"{current} href="{self.listing_path(category, n)}">{n}</a>\n'
            )
        if page < last:
            nxt = self.listing_path(category, page + 1)
            body.append(f'<a class="next" rel="next" href="{nxt}">next</a>\n')
        body.append("</nav>\n")
        return self._page(f"{category}: page {page}", body)

    def _detail(self, product: Product) -> bytes:
        category = html.escape(product.category)
        listing = self.listing_path(product.category, 1)
        if product.price is None:
            price = '<span class="price sold-out">sold out</span>'
        else:
            price = (
                f'<span class="price" data-value="{product.price:.2f}">'
                f"&euro;&nbsp;{product.price:.2f}</span>"
            )
        body = [
            f'<nav class="breadcrumb"><a href="{SHOP}">Shop</a> &rsaquo; '
            f'<a class="category" href="{listing}">{category}</a></nav>\n',
            f'<div class="product">\n<h1 class="product-name">\n    {html.escape(product.name)}'
            "\n</h1>\n",
            f'<p class="offer">{price}</p>\n',
            f'<p>SKU: <span class="sku">{product.sku}</span></p>\n<ul class="tags">',
            *(f"<li>{tag}</li>" for tag in product.tags),
            '</ul>\n<div class="description">\n',
            *(f"<p>{paragraph}</p>\n" for paragraph in product.description),
            '</div>\n</div>\n<h2>Related</h2>\n<ul class="related">\n',
            *(
                f'<li><a class="related" href="{r}.html">{html.escape(self.products[r - 1].name)}'
                "</a></li>\n"
                for r in product.related
            ),
            "</ul>\n",
        ]
        return self._page(f"{product.name} | {product.category}", body)

    # -- ground truth -----------------------------------------------------------------------------

    def truth(self, port: int) -> list[dict[str, object]]:
        """Every product as extraction must find it on its detail page, by number."""
        base = f"http://{self.host}:{port}"
        out: list[dict[str, object]] = []
        for product in self.products:
            out.append(
                {
                    "url": base + product.path,
                    "name": product.name,
                    "price": product.price,
                    "sku": product.sku,
                    "category": product.category,
                    "tags": list(product.tags),
                    "description": " ".join(product.description),
                    "listing": base + self.listing_path(product.category, self.on_page_of(product)),
                }
            )
        return out

    def on_page_of(self, product: Product) -> int:
        """The listing page number that lists ``product``."""
        return self._page_of[product.number]
