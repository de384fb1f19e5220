"""Run a command in private network and mount namespaces, as tests/hostile/netns.py does.

``unshare --net --mount`` (root only): the only interface is a loopback, and
``/etc/resolv.conf`` and ``/etc/nsswitch.conf`` are bind-mounted over with files naming only
the name server on 127.0.0.1:53, so no packet and no DNS query can leave the namespace.
Inside, :func:`setup_inside` brings the loopback up and makes the whole generated-host
network (198.18.0.0/15, RFC 2544's benchmarking network, public to the crawler's address
policy) local to it, so a server bound to 0.0.0.0 answers every host address.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.hostile.netns import netns_unavailable

NETWORK = "198.18.0.0/15"
_ROOT = Path(__file__).resolve().parents[2]


def unavailable() -> str | None:
    """Why the namespace cannot be made here (None if it can)."""
    if shutil.which("ip") is None:
        return "ip (iproute2) not installed"
    return netns_unavailable()


def namespace_command(argv: list[str], resolv_options: str, tmp: Path) -> list[str]:
    """``argv`` wrapped to run in fresh namespaces whose resolver is 127.0.0.1 only."""
    resolv, nsswitch = tmp / "resolv.conf", tmp / "nsswitch.conf"
    resolv.write_text("nameserver 127.0.0.1\n" + (f"options {resolv_options}\n" if resolv_options else ""))
    nsswitch.write_text("hosts: files dns\n")
    script = (
        f"mount --bind {resolv} /etc/resolv.conf && "
        f"mount --bind {nsswitch} /etc/nsswitch.conf && "
        'exec "$@"'
    )
    return ["unshare", "--net", "--mount", "sh", "-c", script, "sh", *argv]


def run_in_namespace(argv: list[str], resolv_options: str = "", timeout_s: float | None = None) -> int:
    """Run ``argv`` (from the repository root) in the namespaces; its exit status."""
    with tempfile.TemporaryDirectory(prefix="webbox-ns-") as tmp:
        cmd = namespace_command(argv, resolv_options, Path(tmp))
        return subprocess.run(cmd, cwd=_ROOT, timeout=timeout_s, check=False).returncode


def setup_inside() -> None:
    """Inside the namespace: loopback up, the host network local to it."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "route", "add", "local", NETWORK, "dev", "lo"], check=True)


if __name__ == "__main__":
    sys.exit(run_in_namespace(sys.argv[1:]))
