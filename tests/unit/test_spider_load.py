"""Loading ``[spider]``: source files and modules, the Spider class, pipelines; every failure is
a ConfigError naming the key, raised before any request."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier_crawl.config import ConfigError, load
from frontier_crawl.spider import Spider, SpiderHost
from tests.unit.spider_helpers import host_for, isolated_imports, settings, write

pytestmark = pytest.mark.usefixtures("isolated_imports")
__all__ = ["isolated_imports"]

ONE = """
from frontier_crawl import Request, Spider

class DocsSpider(Spider):
    def parse(self, response):
        yield {"url": response.url}
"""


def load_error(directory: Path, spider: dict[str, object], extra: str = "") -> str:
    with pytest.raises(ConfigError) as err:
        SpiderHost.load(settings(directory, spider, extra))  # type: ignore[arg-type]
    return str(err.value)


def test_no_spider_section_means_no_host(tmp_path: Path) -> None:
    assert SpiderHost.load(settings(tmp_path)) is None


def test_source_file_is_relative_to_crawl_toml(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    write(conf, "spiders/docs_spider.py", ONE)
    s = settings(conf, {"source": "spiders/docs_spider.py"})
    assert s.spider.source == str(conf / "spiders" / "docs_spider.py")
    host = SpiderHost.load(s)
    assert host is not None
    assert type(host.spider).__name__ == "DocsSpider"


def test_source_module_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "mypkg_spiders/__init__.py", "")
    write(tmp_path, "mypkg_spiders/docs.py", ONE)
    monkeypatch.syspath_prepend(str(tmp_path))
    host = SpiderHost.load(settings(tmp_path / "elsewhere", {"source": "mypkg_spiders.docs"}))
    assert host is not None
    assert type(host.spider).__module__ == "mypkg_spiders.docs"


def test_spider_file_imports_its_neighbours(tmp_path: Path) -> None:
    write(tmp_path, "shared_fields_xyz.py", "FIELDS = ('url',)\n")
    host = host_for(
        tmp_path,
        """
        from shared_fields_xyz import FIELDS
        from frontier_crawl import Spider

        class S(Spider):
            fields = FIELDS
        """,
    )
    assert host.spider.fields == ("url",)  # type: ignore[attr-defined]


def test_imported_bases_are_not_candidates(tmp_path: Path) -> None:
    write(
        tmp_path,
        "base_spiders_xyz.py",
        "from frontier_crawl import Spider\nclass BaseSpider(Spider):\n    pass\n",
    )
    host = host_for(
        tmp_path,
        """
        from base_spiders_xyz import BaseSpider

        class RealSpider(BaseSpider):
            pass
        """,
    )
    assert type(host.spider).__name__ == "RealSpider"


def test_no_spider_subclass(tmp_path: Path) -> None:
    write(tmp_path, "empty_spider.py", "from frontier_crawl import Spider\nX = 1\n")
    msg = load_error(tmp_path, {"source": "empty_spider.py"})
    assert msg.startswith("spider.source: ")
    assert "empty_spider.py" in msg and "no Spider subclass" in msg


def test_two_subclasses_need_class(tmp_path: Path) -> None:
    src = ONE + "\nclass OtherSpider(Spider):\n    pass\n"
    write(tmp_path, "two.py", src)
    msg = load_error(tmp_path, {"source": "two.py"})
    assert msg.startswith("spider.source: ") and "DocsSpider, OtherSpider" in msg
    assert "spider.class" in msg
    host = SpiderHost.load(settings(tmp_path, {"source": "two.py", "class": "OtherSpider"}))
    assert host is not None and type(host.spider).__name__ == "OtherSpider"


def test_bad_class_name(tmp_path: Path) -> None:
    write(tmp_path, "one.py", ONE + "\nclass NotASpider:\n    pass\n")
    msg = load_error(tmp_path, {"source": "one.py", "class": "Nope"})
    assert msg.startswith("spider.class: ") and "'Nope'" in msg and "DocsSpider" in msg
    msg = load_error(tmp_path, {"source": "one.py", "class": "NotASpider"})
    assert msg.startswith("spider.class: ") and "no Spider subclass 'NotASpider'" in msg


def test_class_without_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^spider\.class: needs spider\.source"):
        settings(tmp_path, {"class": "DocsSpider"})


def test_unknown_spider_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"^spider\.klass: unknown key \(did you mean 'class'\?\)"
    ):
        settings(tmp_path, {"source": "x.py", "klass": "X"})


def test_import_error_names_file_and_error(tmp_path: Path) -> None:
    write(tmp_path, "broken.py", "import no_such_module_xyz_123\n")
    msg = load_error(tmp_path, {"source": "broken.py"})
    assert msg.startswith("spider.source: cannot import ")
    assert "broken.py" in msg and "ModuleNotFoundError" in msg and "no_such_module_xyz_123" in msg


def test_error_at_import_time(tmp_path: Path) -> None:
    write(tmp_path, "raises.py", "raise RuntimeError('no database configured')\n")
    msg = load_error(tmp_path, {"source": "raises.py"})
    assert "RuntimeError: no database configured" in msg


def test_syntax_error(tmp_path: Path) -> None:
    write(tmp_path, "syntax.py", "from frontier_crawl import Spider\nclass S(Spider)\n    pass\n")
    msg = load_error(tmp_path, {"source": "syntax.py"})
    assert msg.startswith("spider.source: ") and "SyntaxError" in msg and "line 2" in msg


def test_missing_file_and_missing_module(tmp_path: Path) -> None:
    msg = load_error(tmp_path, {"source": "absent.py"})
    assert msg.startswith("spider.source: cannot read ") and "absent.py" in msg
    msg = load_error(tmp_path, {"source": "no_such_spider_module_xyz"})
    assert msg.startswith("spider.source: cannot import module 'no_such_spider_module_xyz'")


def test_spider_constructor_failure(tmp_path: Path) -> None:
    write(
        tmp_path,
        "ctor.py",
        "from frontier_crawl import Spider\n"
        "class S(Spider):\n    def __init__(self):\n        raise ValueError('boom')\n",
    )
    msg = load_error(tmp_path, {"source": "ctor.py"})
    assert msg == "spider.class: S() failed: ValueError: boom"


@pytest.mark.parametrize(
    "value, ok",
    [("[404, 410]", True), ("range(400, 600)", True), ('"all"', True), ('"some"', False),
     ("[200, 'x']", False), ("[99]", False), ("42", False)],
)  # fmt: skip
def test_handle_status_checked_at_load(tmp_path: Path, value: str, ok: bool) -> None:
    write(
        tmp_path,
        "hs.py",
        f"from frontier_crawl import Spider\nclass S(Spider):\n    handle_status = {value}\n",
    )
    if ok:
        assert SpiderHost.load(settings(tmp_path, {"source": "hs.py"})) is not None
    else:
        msg = load_error(tmp_path, {"source": "hs.py"})
        assert msg.startswith("spider.class: S.handle_status must be")


PIPES = """
class Upper:
    def process_item(self, item, response):
        return item

class NoProcess:
    pass

class Fails:
    def __init__(self):
        raise OSError("cannot connect")
"""


def test_pipelines_load_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "pipes.py", PIPES)
    write(tmp_path, "modpipes_xyz/__init__.py", PIPES)
    monkeypatch.syspath_prepend(str(tmp_path))
    s = settings(tmp_path, {"pipelines": ["pipes.py:Upper", "modpipes_xyz:Upper"]})
    assert s.spider.pipelines == (f"{tmp_path / 'pipes.py'}:Upper", "modpipes_xyz:Upper")
    host = SpiderHost.load(s)
    assert host is not None
    assert type(host.spider) is Spider  # pipelines without a source: the default spider
    assert [p.key for p in host._pipelines] == ["spider.pipelines[0]", "spider.pipelines[1]"]
    assert [type(p.obj).__module__ for p in host._pipelines] == ["pipes", "modpipes_xyz"]


@pytest.mark.parametrize(
    "entries, message",
    [
        (["pipes.py:Upper", "pipes.py"], r"^spider\.pipelines\[1\]: expected \"file\.py:Class"),
        (["pipes.py:Missing"], r"^spider\.pipelines\[0\]: .*pipes\.py has no class 'Missing'"),
        (["pipes.py:NoProcess"], r"^spider\.pipelines\[0\]: NoProcess has no process_item"),
        (
            ["pipes.py:Upper", "pipes.py:Fails"],
            r"^spider\.pipelines\[1\]: Fails\(\) failed: OSError: cannot connect",
        ),
        (["absent.py:Upper"], r"^spider\.pipelines\[0\]: cannot read .*absent\.py"),
        (["no_such_pipe_mod_xyz:Upper"], r"^spider\.pipelines\[0\]: cannot import module"),
    ],
)  # fmt: skip
def test_bad_pipelines(tmp_path: Path, entries: list[str], message: str) -> None:
    write(tmp_path, "pipes.py", PIPES)
    with pytest.raises(ConfigError, match=message):
        SpiderHost.load(settings(tmp_path, {"pipelines": entries}))


def test_spider_and_pipeline_from_one_file_load_once(tmp_path: Path) -> None:
    write(tmp_path, "both.py", ONE + PIPES.replace("class Fails", "class _Fails"))
    s = settings(tmp_path, {"source": "both.py", "pipelines": ["both.py:Upper"]})
    host = SpiderHost.load(s)
    assert host is not None
    assert type(host._pipelines[0].obj).__module__ == type(host.spider).__module__


def test_open_failures_are_config_errors(tmp_path: Path) -> None:
    write(
        tmp_path,
        "hooks.py",
        """
from frontier_crawl import Spider
EVENTS = []

class S(Spider):
    def open(self):
        EVENTS.append("spider.open")
    def close(self):
        EVENTS.append("spider.close")

class Good:
    def open(self, spider):
        EVENTS.append("good.open")
    def close(self, spider):
        EVENTS.append("good.close")
    def process_item(self, item, response):
        return item

class Bad:
    def open(self, spider):
        raise PermissionError("read-only")
    def process_item(self, item, response):
        return item
""",
    )
    host = SpiderHost.load(
        settings(tmp_path, {"source": "hooks.py", "pipelines": ["hooks.py:Good", "hooks.py:Bad"]})
    )
    assert host is not None
    with pytest.raises(
        ConfigError, match=r"^spider\.pipelines\[1\]: Bad\.open\(\) failed: PermissionError"
    ):
        host.open()
    events = type(host.spider).__module__
    import sys

    # what was opened is closed again, in reverse order
    assert sys.modules[events].EVENTS == ["spider.open", "good.open", "good.close", "spider.close"]


def test_load_via_config_file_errors_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "crawl.toml").write_text(
        '[crawl]\nseeds = ["http://a.test/"]\n[spider]\nsource = "nope.py"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"^spider\.source: "):
        SpiderHost.load(load(tmp_path / "crawl.toml"))
