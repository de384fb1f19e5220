"""Scrapy/parsel-style selectors over the page selectolax (lexbor) parsed: ``::text``,
``::attr(name)``, ``.get()``, ``.getall()``, ``.re()``, ``.attrib``, chained ``.css()``.

``Response.css`` answers from the lexbor tree the engine already built for the page's links
(no second parse), and gives what parsel gives for the same query on the same page for the
idioms Scrapy's tutorial uses (the tests compare the two on the same pages):

- ``sel::text``: the text nodes that are children of each match (whitespace-only ones too);
  ``sel ::text`` (a space before): every text node below each match, the match's own included;
- ``sel::attr(name)``: the attribute's value for each match that has it;
- several comma-separated queries: their matches, query by query when their pseudo-elements
  differ, else in document order (parsel: document order always).

XPath, and anything lexbor cannot answer, is parsel's: ``Response.selector`` is a
``parsel.Selector`` built on first use (only pages that ask pay for the lxml tree); an
``.xpath()`` on an element picked with ``css()`` is evaluated on that same element of the
page's lxml tree (``Response.xpath_context``: the element with its tag's index in document
order), so it sees the whole document as in Scrapy (``../following-sibling::``,
``ancestor::``, an absolute ``//``). Should lxml's parse of the page hold a different number
of elements of that tag than lexbor's (broken markup the two parsers repair differently),
the query is evaluated on the element's own HTML instead, with a warning logged once per
crawl process: it then sees only the element's subtree.

Differences from parsel, by design: ``.get()`` of an element is its HTML as lexbor serialises
it (lxml's serialisation differs in details: attribute quoting, void elements); a selector of
an element also answers selectolax's node API (``.text()``, ``.attributes``, ``.css_first()``),
as ``response.css(...)`` returned nodes before. A query lexbor rejects raises
:class:`SelectorError` (a ``ValueError``) naming the query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from re import Pattern
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser, LexborNode

__all__ = ["Selector", "SelectorError", "SelectorList", "select"]

#: a query's trailing pseudo-element: ``::text`` or ``::attr(name)``
_PSEUDO = re.compile(r"::(?:(text)|attr\(\s*['\"]?([^)'\"\s]+)['\"]?\s*\))\s*$")
_TEXT = "-text"


class SelectorError(ValueError):
    """A CSS query the selector engine cannot parse; the message names the query."""


class Selector:
    """One match: an element (``root`` is the lexbor node) or a string (a text node or an
    attribute's value, ``root`` is the string). ``doc``: the page it was picked from (what
    ``xpath`` maps the element back to), None for a selector made otherwise."""

    __slots__ = ("_doc", "_node", "_value")

    def __init__(
        self, node: LexborNode | None = None, value: str | None = None, doc: Any = None
    ) -> None:
        self._node = node
        self._value = value
        self._doc = doc

    @property
    def root(self) -> Any:
        return self._value if self._node is None else self._node

    def get(self) -> str:
        """The text or attribute value; for an element, its HTML."""
        if self._node is None:
            return self._value or ""
        return self._node.html or ""

    extract = get

    def getall(self) -> list[str]:
        return [self.get()]

    def css(self, query: str) -> SelectorList:
        if self._node is None:
            return SelectorList()
        return select(self._node, query, self._doc)

    def xpath(self, query: str, **kwargs: Any) -> Any:
        """parsel's answer, with this element as the context node (in the whole page when
        the selector came from one: module docstring)."""
        import parsel

        if self._node is None:
            return parsel.Selector(text=self._value or "").xpath(query, **kwargs)
        if self._doc is not None:
            context = self._doc.xpath_context(self._node)
            if context is not None:
                return context.xpath(query, **kwargs)
        doc = parsel.Selector(text=self._node.html or "")
        tag = self._node.tag
        context = doc.xpath(f"//body/{tag}[1] | //head/{tag}[1] | /html[not(body)]")
        return (context[0] if context else doc).xpath(query, **kwargs)

    def re(self, regex: str | Pattern[str], replace_entities: bool = True) -> list[str]:
        """The regex's matches in :meth:`get` (its groups if it has any), as parsel."""
        from parsel.utils import extract_regex

        return list(extract_regex(regex, self.get(), replace_entities=replace_entities))

    def re_first(
        self, regex: str | Pattern[str], default: str | None = None,
        replace_entities: bool = True,
    ) -> str | None:  # fmt: skip
        found = self.re(regex, replace_entities)
        return found[0] if found else default

    @property
    def attrib(self) -> dict[str, str]:
        """The element's attributes (an attribute without a value is ``""``)."""
        if self._node is None:
            return {}
        return {k: "" if v is None else v for k, v in self._node.attributes.items()}

    def __getattr__(self, name: str) -> Any:
        # selectolax's node API (.text(), .attributes, .css_first(), .tag, ...): what
        # response.css() returned before it returned selectors
        node = object.__getattribute__(self, "_node")
        if node is None:
            raise AttributeError(f"{type(self).__name__} of a string has no attribute {name!r}")
        return getattr(node, name)

    def __str__(self) -> str:
        return self.get()

    def __repr__(self) -> str:
        data = self.get()
        return f"<Selector data={data[:40]!r}{'...' if len(data) > 40 else ''}>"


class SelectorList(list[Selector]):
    """A list of :class:`Selector` with parsel's list methods."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> Selector: ...
    @overload
    def __getitem__(self, index: slice) -> SelectorList: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Selector | SelectorList:
        if isinstance(index, slice):
            return SelectorList(super().__getitem__(index))
        return super().__getitem__(index)

    def get(self, default: str | None = None) -> str | None:
        return self[0].get() if self else default

    def extract_first(self, default: str | None = None) -> str | None:
        return self.get(default)

    def getall(self) -> list[str]:
        return [s.get() for s in self]

    extract = getall

    def css(self, query: str) -> SelectorList:
        return SelectorList(x for s in self for x in s.css(query))

    def xpath(self, query: str, **kwargs: Any) -> Any:
        import parsel

        return parsel.SelectorList(x for s in self for x in s.xpath(query, **kwargs))

    def re(self, regex: str | Pattern[str], replace_entities: bool = True) -> list[str]:
        return [m for s in self for m in s.re(regex, replace_entities)]

    def re_first(
        self, regex: str | Pattern[str], default: str | None = None,
        replace_entities: bool = True,
    ) -> str | None:  # fmt: skip
        for s in self:
            found = s.re(regex, replace_entities)
            if found:
                return found[0]
        return default

    @property
    def attrib(self) -> dict[str, str]:
        return self[0].attrib if self else {}


def _split(query: str) -> list[str]:
    """``query`` cut at its top-level commas (not inside brackets, parentheses or quotes)."""
    if "," not in query:
        return [query]
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(query):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(query[start:i])
            start = i + 1
    parts.append(query[start:])
    return parts


def _nodes(root: LexborHTMLParser | LexborNode, css: str, query: str) -> list[LexborNode]:
    try:
        return root.css(css)
    except Exception as exc:  # selectolax raises its own error, naming nothing
        raise SelectorError(f"invalid CSS selector {query!r}: {exc}") from None


def _texts(node: LexborNode, deep: bool) -> Iterator[str]:
    children = node.traverse(include_text=True) if deep else node.iter(include_text=True)
    for child in children:
        if child.tag == _TEXT:
            yield child.text_content or ""


def select(root: LexborHTMLParser | LexborNode, query: str, doc: Any = None) -> SelectorList:
    """parsel's ``.css(query)`` answered from a lexbor document or node (``doc``: the page
    the elements' selectors map back to for ``xpath``)."""
    if "::" not in query:
        return SelectorList(Selector(n, None, doc) for n in _nodes(root, query, query))
    groups: list[tuple[str, str | None, list[str]]] = []  # (kind, attr, css parts)
    for part in _split(query):
        m = _PSEUDO.search(part)
        if m is None:
            kind, attr, css = "node", None, part.strip()
        else:
            kind = "text" if m.group(1) else "attr"
            attr, css = m.group(2), part[: m.start()]
            if kind == "text" and (not css.strip() or css[-1].isspace()):
                kind = "deep-text"  # "p ::text", "::text": text nodes at any depth
            css = css.strip()
        if "::" in css:
            raise SelectorError(f"invalid CSS selector {query!r}: unsupported pseudo-element")
        if groups and groups[-1][0] == kind and groups[-1][1] == attr and css:
            groups[-1][2].append(css)
        else:
            groups.append((kind, attr, [css]))
    out = SelectorList()
    for kind, attr, parts in groups:
        css = ", ".join(p for p in parts if p)
        if css:
            nodes: Iterable[LexborNode] = _nodes(root, css, query)
        else:  # "::text" of the node itself
            node: Any = getattr(root, "root", root)  # a parser's root element, or the node
            nodes = [] if node is None else [node]
        if kind == "node":
            out.extend(Selector(n, None, doc) for n in nodes)
        elif kind == "attr":
            assert attr is not None
            for n in nodes:
                attrs = n.attributes
                if attr in attrs:
                    value = attrs[attr]
                    out.append(Selector(value="" if value is None else value))
        else:
            deep = kind == "deep-text"
            out.extend(Selector(value=t) for n in nodes for t in _texts(n, deep))
    return out
