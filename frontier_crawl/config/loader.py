"""Load crawl.toml into :class:`CrawlSettings`, turning every problem into one clear message.

A :class:`ConfigError` message always starts with the dotted key it is about, e.g.
``politeness.min_delay_s: must be >= 0, got -1``; the CLI prints it and exits with status 2
before any request is sent.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from frontier_crawl.config.settings import (
    SECTIONS,
    CrawlSettings,
    ExtractField,
    ExtractRule,
    RecrawlSection,
    SpiderSection,
    check_extract,
)

_AT_RE = re.compile(r"^(?P<msg>.*) - at `\$(?P<path>[^`]*)`$", re.S)
_UNKNOWN_RE = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`$")
_BOUND_RE = re.compile(r"^Expected `\w+` (?P<op>[<>]=?) (?P<bound>\S+)$")


class ConfigError(ValueError):
    """A configuration problem; the message names the key."""


def _lookup(raw: dict[str, Any], path: list[str]) -> Any:
    node: Any = raw
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _fields_of(path: list[str]) -> list[str]:
    if not path:
        return [*SECTIONS, "extract"]
    if path[0] == "extract":  # extract[i] or extract[i].fields.<name>
        table = {2: ExtractRule, 4: ExtractField}.get(len(path))
        return list(table.__struct_fields__) if table is not None else []
    cls = SECTIONS.get(path[0])
    if cls is not None and len(path) == 3 and path[2].isdigit():  # [[section.key]] tables
        table = _table_of(cls, path[1])
        return list(table.__struct_encode_fields__) if table is not None else []
    return list(cls.__struct_encode_fields__) if cls is not None else []


def _table_of(cls: type[msgspec.Struct], key: str) -> type[msgspec.Struct] | None:
    """The table class of a section's array of tables ``key`` (None if it is not one)."""
    for f in msgspec.inspect.type_info(cls).fields:  # type: ignore[attr-defined]
        kind = f.type
        while isinstance(kind, msgspec.inspect.Metadata):
            kind = kind.type
        if (
            f.encode_name == key
            and isinstance(kind, msgspec.inspect.VarTupleType)
            and isinstance(kind.item_type, msgspec.inspect.StructType)
        ):
            return kind.item_type.cls
    return None


def _key(path: list[str]) -> str:
    """The dotted key of a path, tables of an array by index: ``extract[0].fields.price``,
    ``output.feeds[1].path``."""
    out = ""
    for part in path:
        out += f"[{part}]" if part.isdigit() and out else f".{part}" if out else part
    return out


def _nul_check(node: Any, path: list[str]) -> None:
    """A NUL character in any string (value or key) is refused, naming the key: no file
    name, header, URL or pattern can hold one (the OS and libcurl raise on it)."""
    if isinstance(node, str):
        if "\x00" in node:
            raise ConfigError(f"{_key(path)}: must not contain a NUL character")
    elif isinstance(node, dict):
        for k, v in node.items():
            if "\x00" in k:
                raise ConfigError(f"{_key([*path, k])}: a key must not contain a NUL character")
            _nul_check(v, [*path, k])
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _nul_check(v, [*path, str(i)])


def _explain(err: msgspec.ValidationError, raw: dict[str, Any]) -> str:
    text = str(err)
    m = _AT_RE.match(text)
    msg, dotted = (m["msg"], m["path"]) if m else (text, "")
    path = [p for p in re.split(r"\.|\[|\]", dotted) if p]
    unknown = _UNKNOWN_RE.match(msg)
    if unknown:
        field = unknown["field"]
        key = _key([*path, field])
        known = _fields_of(path)
        hint = difflib.get_close_matches(field, known, n=1)
        suffix = f" (did you mean {hint[0]!r}?)" if hint else f" (known keys: {', '.join(known)})"
        return f"{key}: unknown key{suffix}"
    # A ValueError from __post_init__ reads "<field>: <problem>" and is reported at the table.
    if ": " in msg and msg.split(": ", 1)[0].isidentifier() and (
        len(path) <= 1 or path[-1].isdigit()
    ):
        field, problem = msg.split(": ", 1)
        return f"{_key([*path, field])}: {problem}"
    key = _key(path) or "<top level>"
    value = _lookup(raw, path)
    bound = _BOUND_RE.match(msg)
    if bound:
        return f"{key}: must be {bound['op']} {bound['bound']}, got {json.dumps(value)}"
    if msg.startswith("Expected `str | object`") and path[0] == "extract":
        return (
            f"{key}: must be a CSS selector string or a table such as "
            f'{{ css = "span.price", attr = "data-value" }} (value {json.dumps(value)})'
        )
    if msg.startswith("Expected"):
        return f"{key}: {msg[0].lower()}{msg[1:]} (value {json.dumps(value)})"
    if msg.startswith("Invalid enum value") and (len(path) == 2 or path[0] == "extract"):
        allowed = _literal_values(path[0], path[-1], len(path))
        if allowed:
            return f"{key}: must be one of {', '.join(allowed)}, got {json.dumps(value)}"
    return f"{key}: {msg}"


def _literal_values(section: str, field: str, depth: int = 2) -> list[str]:
    """The allowed values of a ``Literal`` key, as JSON (empty if it is not one)."""
    extract: dict[int, type[msgspec.Struct]] = {3: ExtractRule, 5: ExtractField}
    cls = extract.get(depth) if section == "extract" else SECTIONS.get(section)
    if cls is None:
        return []
    for f in msgspec.inspect.type_info(cls).fields:  # type: ignore[attr-defined]
        kind = f.type
        while isinstance(kind, msgspec.inspect.Metadata):
            kind = kind.type
        if f.name == field and isinstance(kind, msgspec.inspect.LiteralType):
            return [json.dumps(v) for v in kind.values]
    return []


def _extract_field_errors(raw: dict[str, Any]) -> None:
    """Name the field of a bad ``[extract.fields]`` value (msgspec's path says ``fields[...]``)."""
    rules = raw.get("extract")
    if not isinstance(rules, list):
        return
    for i, rule in enumerate(rules):
        fields = rule.get("fields") if isinstance(rule, dict) else None
        if not isinstance(fields, dict):
            continue
        for name, spec in fields.items():
            try:
                msgspec.convert(spec, str | ExtractField, strict=True)
            except msgspec.ValidationError as err:
                m = _AT_RE.match(str(err))
                msg, rest = (m["msg"], m["path"].removeprefix("$")) if m else (str(err), "")
                raise msgspec.ValidationError(
                    f"{msg} - at `$.extract[{i}].fields.{name}{rest}`"
                ) from None


def _clamp_recrawl_defaults(raw: dict[str, Any]) -> list[str]:
    """``[recrawl]`` intervals the user left unset take their default clamped into the ones
    the user wrote (``max_interval_s = 40`` alone makes the first interval 40 s, not a refused
    86,400 s); a value the user wrote is never changed. Sets them in ``raw``; a note for each."""
    section = raw.get("recrawl")
    if not isinstance(section, dict):
        return []
    fields = {f.name: f.default for f in msgspec.structs.fields(RecrawlSection)}
    lo, hi = section.get("min_interval_s"), section.get("max_interval_s")
    numbers = (int, float)
    if not all(v is None or (isinstance(v, numbers) and not isinstance(v, bool)) for v in (lo, hi)):
        return []  # the type check names the key
    notes: list[str] = []

    def clamp(key: str, low: float | None, high: float | None) -> float:
        default = float(fields[key])
        value = default if low is None else max(low, default)
        value = value if high is None else min(high, value)
        if value != default:
            section[key] = value
            notes.append(f"recrawl.{key} (unset): its default {default:g} s is outside the "
                         f"intervals set; {value:g} s is used")  # fmt: skip
        return value

    if lo is None:
        lo = clamp("min_interval_s", None, hi)
    if hi is None:
        hi = clamp("max_interval_s", lo, None)
    if "initial_interval_s" not in section:
        clamp("initial_interval_s", lo, hi)
    return notes


#: keys still accepted but no longer used, each with why (a note when a file sets one)
RETIRED_KEYS = {
    ("frontier", "seen_capacity"): "the seen-set is exact in LMDB, with no Bloom filter to size",
    ("frontier", "seen_error_rate"): "the seen-set is exact in LMDB, with no Bloom filter to size",
}


def _retired_notes(raw: dict[str, Any]) -> list[str]:
    """A note for each key of ``RETIRED_KEYS`` that the file sets."""
    notes = []
    for (section, key), why in RETIRED_KEYS.items():
        table = raw.get(section)
        if isinstance(table, dict) and key in table:
            notes.append(f"{section}.{key} is ignored (no longer used: {why})")
    return notes


def parse(
    raw: dict[str, Any], base_dir: Path | None = None, notes: list[str] | None = None
) -> CrawlSettings:
    """Validate a TOML document already read into a dict. ``notes`` (if given) receives a
    line for each default the loader changed to fit what the user wrote, and for each key it
    set that is no longer used (``--check`` prints them, a run says them on stderr)."""
    _nul_check(raw, [])
    adjusted = _clamp_recrawl_defaults(raw)
    if notes is not None:
        notes += adjusted + _retired_notes(raw)
    try:
        _extract_field_errors(raw)
        settings = msgspec.convert(raw, CrawlSettings, strict=True)
    except msgspec.ValidationError as err:
        raise ConfigError(_explain(err, raw)) from None
    try:
        check_extract(settings.extract)  # regexes and CSS selectors, before any request
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    crawl = settings.crawl
    seeds = list(crawl.seeds)
    if crawl.seeds_file is not None:
        seeds_path = Path(crawl.seeds_file)
        if base_dir is not None and not seeds_path.is_absolute():
            seeds_path = base_dir / seeds_path
        try:
            lines = seeds_path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"crawl.seeds_file: cannot read {str(seeds_path)!r}: {exc}") from None
        seeds += [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]
    if not seeds and settings.spider.source is None:  # a spider may have start_urls: the
        raise ConfigError(  # command line checks then, once it has loaded the spider
            "crawl.seeds: at least one seed is required (or crawl.seeds_file)"
        )
    output_dir = Path(crawl.output_dir)
    if base_dir is not None and not output_dir.is_absolute():
        output_dir = base_dir / output_dir
    try:
        new_crawl = msgspec.structs.replace(
            crawl, seeds=tuple(seeds), seeds_file=None, output_dir=str(output_dir)
        )
    except ValueError as exc:  # a bad seed from seeds_file
        raise ConfigError(f"crawl.{exc}") from None
    fetch = settings.fetch
    cache_dir = Path(fetch.cache_dir)
    if base_dir is not None and not cache_dir.is_absolute():
        fetch = msgspec.structs.replace(fetch, cache_dir=str(base_dir / cache_dir))
    spider = _resolve_spider(settings.spider, base_dir)
    for key, value in (("crawl.output_dir", new_crawl.output_dir), ("fetch.cache_dir",
                       fetch.cache_dir), *((f"output.feeds[{i}].path", f.path)
                       for i, f in enumerate(settings.output.feeds))):  # fmt: skip
        problem = path_length_problem(value)
        if problem:
            raise ConfigError(f"{key}: {problem}")
    return msgspec.structs.replace(settings, crawl=new_crawl, fetch=fetch, spider=spider)


def path_length_problem(path: str) -> str | None:
    """A path component longer than the file system takes (NAME_MAX, 255 bytes), or a path
    longer than PATH_MAX: the run could not create it."""
    raw = os.fsencode(path) if path.isascii() else path.encode("utf-8", "surrogateescape")
    if len(raw) >= 4096:
        return f"the path is {len(raw)} bytes long, more than the system takes (4095)"
    longest = max((len(p) for p in raw.split(b"/")), default=0)
    if longest > 255:
        return f"a component of the path is {longest} bytes long, more than 255"
    return None


def is_source_file(source: str) -> bool:
    """Whether a spider or pipeline source names a file (ends in ``.py`` or has a ``/``)
    rather than an importable module."""
    return source.endswith(".py") or "/" in source or "\\" in source


def _resolve_spider(spider: SpiderSection, base_dir: Path | None) -> SpiderSection:
    """Make ``spider.source`` and the pipelines' files absolute (relative to crawl.toml)."""

    def absolute(source: str) -> str:
        path = Path(source).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return str(path)

    source = spider.source
    if source is not None:
        if not source.strip():
            raise ConfigError("spider.source: must not be empty")
        if is_source_file(source):
            source = absolute(source)
    pipelines = []
    for i, entry in enumerate(spider.pipelines):
        where, _, name = entry.rpartition(":")
        if not where.strip() or not name.isidentifier():
            raise ConfigError(
                f'spider.pipelines[{i}]: expected "file.py:ClassName" or '
                f'"module:ClassName", got {entry!r}'
            )
        pipelines.append(f"{absolute(where) if is_source_file(where) else where}:{name}")
    return msgspec.structs.replace(spider, source=source, pipelines=tuple(pipelines))


def default_output_dir(config: Path) -> str:
    """``crawl.output_dir`` of a file that does not set it: ``crawls/<file name without
    .toml>`` beside the file."""
    return f"crawls/{config.stem or 'crawl'}"


def load(path: str | Path, notes: list[str] | None = None) -> CrawlSettings:
    """Read and validate a crawl.toml file (``notes``: see :func:`parse`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    crawl = raw.setdefault("crawl", {})
    if isinstance(crawl, dict) and "output_dir" not in crawl:
        # one directory per config file: two configs in one folder never become one crawl
        crawl["output_dir"] = default_output_dir(path)
        if notes is not None:
            where = path.resolve().parent / crawl["output_dir"]
            notes.append(f"crawl.output_dir is not set: this crawl writes to {where} (set it "
                         f"in {path.name})")  # fmt: skip
    return parse(raw, base_dir=path.resolve().parent, notes=notes)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table; unset (None) keys left out
        items = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    raise TypeError(f"cannot render {value!r} as TOML")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _extract_toml(rules: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for rule in rules:
        out.append("[[extract]]")
        fields = rule.pop("fields")
        out += [f"{key} = {_toml_value(value)}" for key, value in rule.items()]
        out.append("[extract.fields]")
        out += [f"{_toml_key(name)} = {_toml_value(spec)}" for name, spec in fields.items()]
        out.append("")
    return out


def to_toml(settings: CrawlSettings) -> str:
    """Render the effective settings as TOML (unset optional keys become comments)."""
    out: list[str] = []
    for section, values in msgspec.to_builtins(settings).items():
        if section == "extract":
            out += _extract_toml(values)
            continue
        out.append(f"[{section}]")
        for key, value in values.items():
            out.append(f"# {key} = (unset)" if value is None else f"{key} = {_toml_value(value)}")
        out.append("")
    return "\n".join(out)
