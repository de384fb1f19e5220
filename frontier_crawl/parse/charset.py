"""Turn response bytes into a lexbor document, choosing the character encoding.

The order follows the HTML Standard's encoding sniffing, simplified:

1. A byte-order mark wins: lexbor's own detection (``encoding=True``) reads it.
2. Otherwise the ``charset`` of the Content-Type header, when it names an encoding the web
   platform supports. UTF-8 bytes go straight to lexbor (invalid sequences become U+FFFD);
   other encodings are decoded by Python with ``errors="replace"`` and the text handed over.
   Labels map as browsers map them (``iso-8859-1`` and ``us-ascii`` mean windows-1252, and so on).
3. No usable header charset (absent, unknown, or something like ``utf-7`` or ``base64`` that
   browsers refuse): a ``<meta charset>`` or ``<meta http-equiv content="...; charset=...">``
   within the first 1024 bytes (a simplified prescan: one regular expression; a meta that says
   UTF-16 means UTF-8, as in the HTML Standard), else lexbor's own detection, else UTF-8.

:func:`parse_document` also returns the encoding it chose (None for UTF-8, and for UTF-16,
whose pages encode URLs as UTF-8): the query strings of the page's links are percent-encoded
in it (:mod:`frontier_crawl.parse.resolve`).

A wrong header therefore costs at most some U+FFFD in non-ASCII URLs; it never raises. A page
whose elements nest thousands deep is parsed up to there (:mod:`frontier_crawl.parse.nesting`).
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.parse.nesting import SCAN_ABOVE, nesting_cut

_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)", re.IGNORECASE)
_PRESCAN_BYTES = 1024
_UTF16 = frozenset(("utf-16-le", "utf-16-be"))

# WHATWG labels Python does not know, and Python codecs to replace by the WHATWG decoder.
_LABEL_ALIASES = {
    "windows-874": "cp874",
    "x-mac-cyrillic": "mac-cyrillic",
    "x-sjis": "cp932",
    "windows-31j": "cp932",
    "x-gbk": "gb18030",
}
_WHATWG_DECODER = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "utf-16": "utf-16-le",
}
# Encodings of the WHATWG Encoding Standard, as Python codec names (after _WHATWG_DECODER):
# each its codec's own ``codecs.lookup(name).name`` (tests/unit/test_links.py checks), written
# out so that no process loads 36 codec modules when it imports this one
_SUPPORTED = frozenset((
    "utf-8", "cp866", "iso8859-2", "iso8859-3", "iso8859-4", "iso8859-5", "iso8859-6",
    "iso8859-7", "iso8859-8", "iso8859-10", "iso8859-13", "iso8859-14", "iso8859-15",
    "iso8859-16", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874", "cp932",
    "cp949", "cp1250", "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256",
    "cp1257", "cp1258", "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "utf-16-be",
    "utf-16-le",
))  # fmt: skip


def parse_document(
    body: bytes, content_type_header: str | None
) -> tuple[LexborHTMLParser, str | None]:
    """Parse ``body`` as HTML, decoded as described in the module docstring; also return the
    page's encoding for URLs (a Python codec name, None for UTF-8)."""
    tree, url_encoding, _charset = parse_document_charset(body, content_type_header)
    return tree, url_encoding


def parse_document_charset(
    body: bytes, content_type_header: str | None
) -> tuple[LexborHTMLParser, str | None, str | None]:
    """:func:`parse_document`, and the charset it decoded with (:func:`page_charset`). The
    parser is given the part of the page that nests within bounds (:mod:`.nesting`)."""
    if body.startswith(_BOMS):
        charset = _bom_charset(body)
        if charset != "utf-8" and body.count(b"<") > SCAN_ABOVE:  # (tags found in the text)
            text = body.decode(charset, "replace").removeprefix("\ufeff")
            return LexborHTMLParser(text[: nesting_cut(text)]), None, charset
        return LexborHTMLParser(body[: nesting_cut(body)], encoding=True), None, charset
    codec = header_codec(content_type_header) if content_type_header else None
    if codec is None:
        codec = _meta_codec(body)
        if codec is None:
            return LexborHTMLParser(body[: nesting_cut(body)], encoding=True), None, None
    if codec == "utf-8":
        return LexborHTMLParser(body[: nesting_cut(body)]), None, codec
    text = body.decode(codec, "replace")
    tree = LexborHTMLParser(text[: nesting_cut(text)])
    return tree, None if codec in _UTF16 else codec, codec


def _bom_charset(body: bytes) -> str:
    if body.startswith(_BOMS[0]):
        return "utf-8"
    return "utf-16-be" if body.startswith(_BOMS[1]) else "utf-16-le"


def page_charset(body: bytes, content_type_header: str | None) -> str | None:
    """The encoding :func:`parse_document` decodes ``body`` with, as a Python codec name
    (``utf-8``, ``cp1252``, ``utf-16-le``...), or None when it is left to lexbor's detection
    (no byte-order mark, no usable header charset, no ``<meta>`` charset)."""
    if body.startswith(_BOMS):
        return _bom_charset(body)
    codec = header_codec(content_type_header) if content_type_header else None
    return codec if codec is not None else _meta_codec(body)


@lru_cache(maxsize=256)
def header_codec(content_type_header: str) -> str | None:
    """Python codec for the header's ``charset`` parameter; None if absent or unsupported."""
    return _label_codec(_charset_label(content_type_header))


def _meta_codec(body: bytes) -> str | None:
    """The codec a ``<meta>`` in the first 1024 bytes names (UTF-16 read as UTF-8), or None."""
    match = _META_CHARSET.search(body, 0, _PRESCAN_BYTES)
    if match is None:
        return None
    codec = _label_codec(match.group(1).decode("ascii").lower())
    return "utf-8" if codec in _UTF16 else codec


@lru_cache(maxsize=256)
def _label_codec(label: str) -> str | None:
    """Python codec for a lower-cased encoding label; None if empty or unsupported."""
    if not label:
        return None
    try:
        name = codecs.lookup(_LABEL_ALIASES.get(label, label)).name
    except (LookupError, ValueError):
        return None
    name = _WHATWG_DECODER.get(name, name)
    return name if name in _SUPPORTED else None


def _charset_label(content_type_header: str) -> str:
    """The lower-cased, unquoted ``charset`` parameter value, "" when there is none."""
    for param in content_type_header.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip("\"'").strip().lower()
    return ""
