"""``[[extract]]`` rules: items from CSS selectors, for pages whose URL matches a regex.

No code: each rule (``frontier_crawl.config.ExtractRule``) names a URL regular expression and a
table of fields, each a CSS selector whose first match gives the field's text, or a table that
asks for an attribute instead (``attr``), every match (``all``), the text as written
(``strip = false``), a part of it (``re``) or a number (``type``). ``each`` gives one item per
matching node (a listing's products) instead of one per page. The shape follows Portia's
annotations (a field per selector, repeated containers, required fields) and Scrapy's
ItemLoader defaults (``TakeFirst``, ``MapCompose(str.strip)``, ``re_first``), without code.

``compile_rules`` validates (a bad regex or selector raises :class:`ConfigError` naming the key,
``extract[0].fields.price.css``) and compiles once; :meth:`Rules.items` then never raises:
a selector that matches nothing gives ``None`` (``[]`` with ``all``), a value that does not
convert gives ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frontier_crawl.config import ConfigError
from frontier_crawl.config.settings import ExtractField, ExtractRule, check_extract

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser, LexborNode

__all__ = ["Rules", "compile_rules"]

Value = str | int | float | None


def _to_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _to_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


_CONVERT: dict[str, Callable[[str], Value]] = {"str": str, "int": _to_int, "float": _to_float}


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    css: str
    attr: str
    all: bool
    strip: bool
    pattern: re.Pattern[str] | None
    convert: Callable[[str], Value]

    @classmethod
    def of(cls, name: str, spec: str | ExtractField) -> _Field:
        if isinstance(spec, str):
            return cls(name, spec, "", False, True, None, str)
        pattern = re.compile(spec.re) if spec.re else None
        return cls(name, spec.css, spec.attr, spec.all, spec.strip, pattern, _CONVERT[spec.type])

    def value(self, node: LexborNode) -> Value:
        """The field's value from one matched node, None when it has none."""
        if self.attr:
            raw = node.attributes.get(self.attr)
            if raw is None:  # absent, or present without a value (<input disabled>)
                return None if self.attr not in node.attributes else ""
            text = raw
        else:
            text = node.text(deep=True, separator="", strip=False)
        if self.strip:
            text = " ".join(text.split())
        if self.pattern is not None:
            m = self.pattern.search(text)
            if m is None:
                return None
            text = m.group(1) if self.pattern.groups else m.group(0)
            text = text or ""  # an optional group that did not take part
        return self.convert(text)

    def extract(self, root: LexborHTMLParser | LexborNode) -> Value | list[Value]:
        if self.all:
            values = (self.value(node) for node in root.css(self.css))
            return [v for v in values if v is not None]
        node = root.css_first(self.css)
        return None if node is None else self.value(node)


@dataclass(frozen=True, slots=True)
class _Rule:
    url: re.Pattern[str]
    each: str
    fields: tuple[_Field, ...]
    required: frozenset[str]
    url_field: str

    def items(self, url: str, tree: LexborHTMLParser) -> list[dict[str, Any]]:
        roots: Sequence[LexborHTMLParser | LexborNode] = [tree]
        if self.each:
            roots = tree.css(self.each)
        out: list[dict[str, Any]] = []
        for root in roots:
            item: dict[str, Any] = {}
            if self.url_field:
                item[self.url_field] = url
            for f in self.fields:
                item[f.name] = f.extract(root)
            if all(item[name] not in (None, "", []) for name in self.required):
                out.append(item)
        return out


class Rules:
    """Compiled ``[[extract]]`` rules, in the order of the config."""

    __slots__ = ("_rules",)

    def __init__(self, rules: tuple[_Rule, ...]) -> None:
        self._rules = rules

    def __len__(self) -> int:
        return len(self._rules)

    def matches(self, url: str) -> bool:
        """Whether any rule applies to ``url`` (so a caller can skip parsing when none does)."""
        return any(rule.url.search(url) for rule in self._rules)

    def items(self, url: str, tree: LexborHTMLParser) -> list[dict[str, Any]]:
        """The items of every rule whose regex matches ``url``, rule by rule; never raises.

        ``url`` is the page's final URL; ``tree`` the page parsed once by the caller.
        """
        out: list[dict[str, Any]] = []
        for rule in self._rules:
            if rule.url.search(url):
                out += rule.items(url, tree)
        return out


def compile_rules(rules: Sequence[ExtractRule]) -> Rules:
    """Validate and compile ``[[extract]]`` rules (``CrawlSettings.extract``).

    Raises :class:`ConfigError` naming the key (``extract[1].fields.price.css: invalid CSS
    selector ...``) for a bad regex or selector, a rule with no field, an unknown
    ``required`` name.
    """
    rules = tuple(rules)
    try:
        check_extract(rules)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return Rules(
        tuple(
            _Rule(
                url=re.compile(rule.url),
                each=rule.each,
                fields=tuple(_Field.of(name, spec) for name, spec in rule.fields.items()),
                required=frozenset(rule.required),
                url_field="" if rule.url_field in rule.fields else rule.url_field,
            )
            for rule in rules
        )
    )
