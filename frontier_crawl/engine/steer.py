"""Steering the crawl: operator commands (the control API's, or a worker's coordinator's),
reloads of crawl.toml (SIGHUP, the API), pause and resume, and the stop signals. Commands are
drained once per tick, in the loop's thread (``take``): crawl-state changes go through the
frontier inside the open group commit, durable with it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from frontier_crawl.config import ConfigError, CrawlSettings, load
from frontier_crawl.config.reload import reload_plan
from frontier_crawl.control.commands import Command
from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.engine.deadline import StopDeadline
from frontier_crawl.engine.observe import Observer
from frontier_crawl.engine.seams import CommandSource, FetcherLike, PeersLike
from frontier_crawl.engine.state import LoopState, quiet
from frontier_crawl.frontier.faces import Steered
from frontier_crawl.frontier.scope import check_scope
from frontier_crawl.proctree import EXPIRE_SIGNAL
from frontier_crawl.spider.adopt import adopt

if TYPE_CHECKING:
    from frontier_crawl.control.server import ControlServer

log = logging.getLogger(__name__)


class Steering:
    """Commands, reloads, pause and stop for one crawl process, on the parts it is given."""

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        frontier: Steered,
        fetcher: FetcherLike,
        group: CommitGroup,
        run: LoopState,
        deadline: StopDeadline,
        observe: Observer,
        reconfigure: Callable[[CrawlSettings, float], None],
        root: Path,
        commands: CommandSource | None = None,
        peers: PeersLike | None = None,
        config_path: Path | None = None,
        reshape: Callable[[CrawlSettings], CrawlSettings] | None = None,
        loaded: CrawlSettings | None = None,
    ) -> None:
        """``reconfigure(new, now)``: applies reloaded settings to the loop's parts.
        ``config_path``: the crawl.toml a reload reads again; ``reshape`` turns what it loads
        into this process's settings (a worker's), ``loaded`` being the file's settings
        before that (what a reload is compared with). ``commands``: operator commands from
        elsewhere (a worker's coordinator); without it, the control API is served here when
        ``[control] listen`` is set (``root``: the crawl's output directory). ``deadline``:
        what a stop signal arms (``deadline.py``)."""
        self.settings = settings
        self.frontier = frontier
        self.fetcher = fetcher
        self._group = group
        self._run = run
        self._deadline = deadline
        self._observe = observe
        self._reconfigure = reconfigure
        self._root = root
        self.commands: CommandSource | None = commands
        self._control: ControlServer | None = None
        self._peers = peers
        self._config_path = config_path
        self._reshape = reshape
        self._loaded = loaded or settings  #: the file's settings, before ``reshape``
        self.reload_requested = False  #: SIGHUP received (or a coordinator's order)
        self._reloads_seen = 0  #: a worker's reload orders from its coordinator, obeyed

    def start_control(self) -> None:
        """Serve the control API if ``[control] listen`` is set (not in a worker process: its
        coordinator serves the crawl's one API and forwards commands)."""
        listen = self.settings.control.listen
        if not listen or self.commands is not None or self._peers is not None:
            return
        from frontier_crawl.control.server import ControlServer  # http.server: ~50 ms

        self._control = ControlServer(
            listen, self._root, self._observe.fresh_status, self._observe.metrics_text
        )
        self.commands = self._control.queue

    @property
    def control_address(self) -> str | None:
        """``host:port`` the control API listens on (None: it is off, or not this process's)."""
        return self._control.address if self._control is not None else None

    def wake_on_commands(self) -> None:
        wake_on = getattr(self.fetcher, "wake_on", None)
        if wake_on is not None and self.commands is not None:  # a command ends a wait in poll
            wake_on(self.commands.fileno)

    def stop_control(self) -> None:
        if self._control is not None:
            with quiet():
                self._control.close()
            self._control = None

    def take(self, now: float) -> bool:
        """Apply the operator's commands posted since the last tick (and a SIGHUP's reload);
        True if any was applied."""
        pending = self.commands.take() if self.commands is not None else ()
        if getattr(self.commands, "closed", False):  # a worker's pipe whose other end is gone
            wake_on = getattr(self.fetcher, "wake_on", None)
            if wake_on is not None:
                wake_on(None)
            self.commands = None
        if self.reload_requested:
            self.reload_requested = False
            reply = self.reload(time.monotonic())  # logs what it applied or refused
            if "error" not in reply and not reply.get("changed"):
                log.info("SIGHUP: %s read again: nothing changed", self._config_path)
        replies = []
        for item in pending:
            try:
                replies.append(self.apply(item.command, time.monotonic()))
            except ConfigError as exc:
                replies.append({"error": str(exc)})
            except OSError:  # a failed write (LMDB, outputs): the run ends as for any other
                for rest in pending:
                    rest.answer({"error": "a write failed: the crawl is stopping"})
                raise
            except Exception as exc:  # a bad command must not end the crawl: say so, go on
                log.exception("operator command %s failed", item.command.name)
                replies.append({"error": f"{item.command.name} failed: {exc!r}"})
        if pending:  # a status read after the reply shows the change
            self._observe.sample(time.monotonic(), force=True)
        for item, reply in zip(pending, replies, strict=True):
            item.answer(reply)
        return bool(pending)

    def apply(self, command: Command, now: float) -> dict[str, Any]:
        """Apply one operator command in the loop; the reply for the API. Crawl-state changes
        (blocks, host delays, seeds) go into the open group commit, durable with it."""
        name = command.name
        applied: dict[str, Any] = {"result": "applied", "command": name}
        if name == "pause":
            if not self._run.paused:
                log.info("paused by the operator: no new requests (in-flight ones finish)")
            self._run.paused = True
            return {**applied, "paused": True, "in_flight": self.fetcher.in_flight}
        if name == "resume":
            if self._run.paused:
                log.info("resumed by the operator")
            self._run.paused = False
            return {**applied, "paused": False}
        if name == "stop":
            if not self._run.stop_requested:
                self._run.stop_requested = 1
                log.info("stop requested by the operator: finishing in-flight transfers "
                            "(up to %.0f s), then stopping",
                            self.settings.crawl.stop_timeout_s)  # fmt: skip
            return {**applied, "in_flight": self.fetcher.in_flight}
        if name == "concurrency":
            set_concurrency = getattr(self.fetcher, "set_concurrency", None)
            if set_concurrency is None:
                return {"error": "this fetcher's concurrency cannot be changed"}
            set_concurrency(command.value)
            log.info("concurrency set to %d by the operator", command.value)
            return {**applied, "concurrency": command.value}
        if name == "reload":
            return self.reload(now)
        if name == "status":  # from a worker's coordinator: a fresh snapshot (the loop's thread)
            return {**self._observe.status(), "metrics": self._observe.metrics()}
        self._group.dirty = True
        self._group.open(now)
        frontier = self.frontier
        if name == "seeds":
            admitted = frontier.add(command.urls, depth=0, now=now)
            log.info("%d of %d seed(s) added by the operator admitted", admitted,
                        len(command.urls))  # fmt: skip
            return {**applied, "given": len(command.urls), "admitted": admitted}
        if name == "block":
            held = frontier.holds.block(command.host, now)
            log.info("host %s blocked by the operator (%d URLs held)", command.host, held,
                     extra={"host": command.host})
            return {**applied, "host": command.host, "held": held}
        if name == "unblock":
            released = frontier.holds.unblock(command.host, now)
            log.info("host %s unblocked by the operator", command.host,
                     extra={"host": command.host})
            return {**applied, "host": command.host, "released": released}
        if name == "host-delay":
            if command.delay_s is not None and not frontier.holds.knows_host(command.host):
                # not stored: a typo must not read "delay 2 s" (ctl says the host is unknown;
                # with worker processes only the owner of the host knows it)
                return {**applied, "host": command.host, "delay_s": command.delay_s,
                        "origins": 0}  # fmt: skip
            hosts = frontier.holds.set_host_delay(command.host, command.delay_s, now)
            delay = command.delay_s
            said = "back to the config" if delay is None else f"set to {delay:g} s"
            log.info("host %s: delay %s by the operator", command.host, said,
                     extra={"host": command.host})  # fmt: skip
            return {**applied, "host": command.host, "delay_s": command.delay_s, "origins": hosts}
        return {"error": f"unknown command {name!r}"}

    def reload(self, now: float) -> dict[str, Any]:
        """Read crawl.toml again: apply its changed tunables, or refuse it all (a bad file, a
        changed identity or fixed key) and keep the running config."""
        if self._config_path is None:
            return {"error": "not reloaded: this crawl was not started from a config file"}
        try:
            new = adopt(load(self._config_path))  # as the command line: the spider's settings
            check_scope(new)
        except ConfigError as exc:
            log.error("config not reloaded, the running config stays: %s", exc)
            return {"error": f"config not reloaded, the running config stays: {exc}"}
        plan = reload_plan(self._loaded, new)
        if plan.refused:
            log.error("%s", plan.message)
            return {"error": plan.message, "refused": list(plan.refused)}
        if plan.changed:
            self._loaded = new
            if self._reshape is not None:
                new = self._reshape(new)
            self.settings = new
            self._reconfigure(new, now)
            log.info("config reloaded: %s", ", ".join(plan.changed))
        return {"result": "applied", "command": "reload", "changed": list(plan.changed)}

    def install_signals(self) -> dict[int, Any]:
        """The main process's handlers; a worker ignores the terminal's signals (sent to
        every process of the crawl at once): its coordinator orders it (``obey_coordinator``),
        and tells it when its stop's deadline passed (``EXPIRE_SIGNAL``: ``deadline.py``)."""
        previous: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                handler = self._on_hangup if sig == signal.SIGHUP else self._on_signal
                ours = handler if self._peers is None else signal.SIG_IGN
                previous[sig] = signal.signal(sig, ours)
            except ValueError:  # not the main thread
                return previous
        if self._peers is not None:
            previous[EXPIRE_SIGNAL] = signal.signal(EXPIRE_SIGNAL, self._deadline.expire)
        return previous

    def obey_coordinator(self) -> None:
        """A worker: its coordinator's stop and reload orders (its signals, passed on)."""
        assert self._peers is not None
        stop, reloads = self._peers.orders()
        if stop and not self._run.stop_requested:
            self._run.stop_requested = 1
            log.warning(
                "worker %d: stopping: finishing in-flight transfers (up to %.0f s)",
                self._peers.worker, self.settings.crawl.stop_timeout_s,
            )  # fmt: skip
        if reloads != self._reloads_seen:
            self._reloads_seen = reloads
            self.reload_requested = True

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        """SIGHUP: read crawl.toml again (in the loop, at its next tick)."""
        del signum, frame
        self.reload_requested = True

    @staticmethod
    def restore_signals(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """First signal: stop gracefully. Second: exit at once (as safe as a kill -9)."""
        del frame
        self._run.stop_requested += 1
        if self._run.stop_requested > 1:
            os.write(2, b"frontier-crawl: second signal, exiting at once\n")
            os._exit(128 + signum)
        self._deadline.arm(self.settings.crawl.stop_timeout_s)  # (user code may hold the loop)
        log.warning(
            "received %s: finishing in-flight transfers (up to %.0f s), then stopping",
            signal.Signals(signum).name,
            self.settings.crawl.stop_timeout_s,
        )
