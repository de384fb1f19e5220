"""contrib/man/frontier-crawl.1 is what contrib/man/generate.sh makes from the CLI's parser now
(its date line aside), so a new option or subcommand cannot leave the man page behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "contrib" / "man"


def body(text: str) -> list[str]:
    """The page without its ``.TH`` line, which carries the day it was made."""
    return [line for line in text.splitlines() if not line.startswith(".TH ")]


@pytest.mark.timeout(60)
def test_man_page_is_up_to_date() -> None:
    if shutil.which("argparse-manpage", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("argparse-manpage (the dev extra) is not installed")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    made = subprocess.run(
        ["sh", str(MAN / "generate.sh")], capture_output=True, text=True, env=env, timeout=60,
        check=True,
    ).stdout
    assert body(made) == body((MAN / "frontier-crawl.1").read_text()), (
        "contrib/man/frontier-crawl.1 is stale: run contrib/man/generate.sh > "
        "contrib/man/frontier-crawl.1"
    )
    for name in ("demo", "config-reference", "ctl", "completion", "EXIT STATUS"):
        assert name.replace("-", "\\-") in made
