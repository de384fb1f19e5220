"""``frontier-crawl completion bash|zsh``: the scripts come from the CLI's own parser, so they name
every subcommand and option the parser has; the bash one is run by bash and completes them, the
zsh one passes ``zsh -n`` where zsh is installed."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from frontier_crawl.cli import _parser


def completion(shell: str) -> str:
    """The script as an operator gets it: the console entry point run as a process."""
    out = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "completion", shell],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stderr == ""
    return out.stdout


def subcommands() -> list[str]:
    """The subcommands the parser defines, read from the parser itself."""
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    raise AssertionError("the parser has no subcommands")


def test_subcommands_known() -> None:
    """The list the other tests check against is the real one (completion itself included)."""
    names = subcommands()
    assert {"demo", "config-reference", "ctl", "report", "add-seeds", "completion"} <= set(names)


@pytest.mark.timeout(60)
def test_bash_completion_completes_the_subcommands(tmp_path: Path) -> None:
    script = tmp_path / "frontier-crawl.bash"
    script.write_text(completion("bash"))
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)  # syntax

    def complete(*words: str, partial: str = "") -> list[str]:
        """COMPREPLY of bash's completion function for ``frontier-crawl WORDS PARTIAL<TAB>``."""
        line = " ".join(("frontier-crawl", *words))
        prog = (
            f'source {script}; COMP_WORDS=({line} "{partial}"); '
            'COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _shtab_frontier_crawl; '
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        out = subprocess.run(
            ["bash", "-c", prog], capture_output=True, text=True, timeout=30, check=True
        )
        return out.stdout.split()

    assert complete() == subcommands()
    assert complete("completion") == ["bash", "zsh"]
    options = {"--config", "--check", "--node", "--verbose", "--version"}
    assert set(complete(partial="--")) >= options
    assert "complete -o bashdefault -F _shtab_frontier_crawl frontier-crawl" in script.read_text()


@pytest.mark.timeout(60)
def test_zsh_completion_names_the_subcommands(tmp_path: Path) -> None:
    text = completion("zsh")
    assert text.startswith("#compdef frontier-crawl\n")
    for name in subcommands():
        assert f"\n    {name}:" in text, name  # each one offered, with its help text
    for option in ("--config", "--check", "--node", "--verbose"):
        assert option in text
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed: the syntax check (zsh -n) needs it")
    script = tmp_path / "_frontier-crawl"
    script.write_text(text)
    subprocess.run([zsh, "-n", str(script)], check=True, timeout=30)


def test_unknown_shell_is_a_usage_error() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "completion", "fish"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "invalid choice: 'fish'" in out.stderr
