"""How much of a page the HTML parser is given: a bound on how deep its elements nest.

An HTML parser looks through its stack of open elements at many tags (the HTML Standard's "has
an element in scope" steps, the adoption agency of misnested ``<a>``, ``<b>``...), so a page
whose elements nest ``n`` deep costs time in ``n`` squared: a body of nothing but ``<div>``
makes lexbor quadratic in its size. Browsers cap the depth of the tree they build; lexbor does
not, so the page is cut instead: :func:`nesting_cut` is the length of the longest prefix whose
nesting stays within :data:`MAX_NESTING`, and only that prefix is parsed (the links after it are
not read: no page a person reads nests thousands of elements deep).

The depth is estimated in one linear pass over the tags, never below the parser's own: every
start tag counts but void elements and those whose start closes an open one of their kind
(``p``, ``li``, ``td``...); an end tag uncounts one open element of its name, if there is one;
``/>`` closes an element only in SVG or MathML (outside them ``<div/>`` opens a ``div``), and an
HTML element that breaks out of foreign content ends it. A body with few ``<`` (most pages)
is not scanned: however deep it nests, it costs little.
"""

from __future__ import annotations

import re

__all__ = ["MAX_NESTING", "nesting_cut"]

#: the deepest nesting parsed (the estimate's, which is never below the parser's)
MAX_NESTING = 4096
#: bodies with at most this many ``<`` are parsed whole, unscanned
SCAN_ABOVE = 10_000
#: a tag: ``/`` if an end tag, its name, its attributes up to the next ``<`` or ``>`` (so each
#: byte is read at most twice, whatever is left unclosed) and a ``/`` before its ``>``
_TAG = re.compile(r"<(/?)([A-Za-z][^\s/<>]*)[^<>]*?(/?)(?:>|(?=<)|\Z)")
#: start tags that never nest: void elements, and those implied closed by the next of their kind
_FLAT = frozenset((
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "param", "keygen", "basefont", "bgsound", "frame", "p", "li", "dt", "dd", "option",
    "optgroup", "tr", "td", "th", "rb", "rt", "rtc", "rp", "thead", "tbody", "tfoot", "colgroup",
    "caption",
))  # fmt: skip
_FOREIGN = frozenset(("svg", "math"))
#: HTML elements whose start tag ends foreign content (HTML Standard 13.2.6.5)
_BREAKOUT = frozenset((
    "b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em",
    "embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing",
    "menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong", "strike",
    "sub", "sup", "table", "tt", "u", "ul", "var", "font",
))  # fmt: skip


def nesting_cut(doc: bytes | str) -> int:
    """The length of ``doc``'s prefix to parse: all of it unless its elements nest deeper
    than MAX_NESTING, else up to the tag that would pass it."""
    if len(doc) <= 3 * SCAN_ABOVE:  # (a tag that nests is 3 characters or more: "<a>")
        return len(doc)
    if isinstance(doc, bytes):
        if doc.count(b"<") <= SCAN_ABOVE:
            return len(doc)
        text = doc.decode("latin-1")  # (one C pass; tag names are ASCII in any case)
    else:
        text = doc
        if text.count("<") <= SCAN_ABOVE:
            return len(doc)
    depth, foreign = 0, 0
    opened: dict[str, int] = {}
    flat, breakout = _FLAT, _BREAKOUT
    for i, (end_tag, raw, self_closing) in enumerate(_TAG.findall(text)):
        name = raw.lower()
        if end_tag:
            if opened.get(name, 0) > 0:
                opened[name] -= 1
                depth -= 1
                if foreign and name in _FOREIGN:
                    foreign -= 1
            continue
        if foreign and name in breakout:
            foreign = 0
        if name in flat or (self_closing and (foreign or name in _FOREIGN)):
            continue
        opened[name] = opened.get(name, 0) + 1
        depth += 1
        if name in _FOREIGN:
            foreign += 1
        if depth > MAX_NESTING:
            return _nth_tag(text, i)
    return len(doc)


def _nth_tag(text: str, n: int) -> int:
    """Where the ``n``-th tag (from 0) of ``text`` starts (found again: a cut is rare)."""
    for i, match in enumerate(_TAG.finditer(text)):
        if i == n:
            return match.start()
    return len(text)
