"""The one error a frontier raises at start-up for state it cannot use as it finds it.

The frontier only detects damage (it owns the formats); what to do about it is the engine's
decision: set the file or directory aside, say so, and build the frontier again.
"""

from __future__ import annotations

from pathlib import Path


class DamagedState(Exception):
    """``path`` (a file or directory of the state directory) is unreadable or inconsistent.

    ``problem`` says what is wrong with it; ``consequence`` what setting it aside and starting
    it afresh means for the crawl (both written for the operator).
    """

    def __init__(self, path: Path, problem: str, consequence: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.consequence = consequence
