"""A Procfile runner: start named shell commands together, keep them running, stop them together.

Each child runs in its own session so a stop reaches its whole process tree. A child that exits
without being asked is restarted after a pause that doubles with each quick crash (1 s, 2 s, 4 s…
up to 30 s) and starts again from 1 s once the child has run steadily for a minute; whatever the
dead child left behind in its session is killed first, so a restarted worker never shares the
queue with its predecessor's orphans. Signal handlers only set a flag (printing from a handler
can re-enter a half-written stdout); the loop does the rest. Ctrl-C or SIGTERM stops everything.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

STOP_GRACE_SECONDS = 10.0
FIRST_RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 30.0
STEADY_SECONDS = 60.0


def parse_procfile(text: str) -> dict[str, str]:
    """Return `{name: command}` from Procfile text (`name: command` lines, `#` comments)."""
    processes = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip().isidentifier() or not command.strip():
            raise ValueError(f"Procfile line {number} is not 'name: command': {line!r}")
        processes[name.strip()] = command.strip()
    return processes


def restart_delay(
    crashes: int, *, first: float = FIRST_RESTART_DELAY, ceiling: float = MAX_RESTART_DELAY
) -> float:
    """Return the pause before restarting a child after its `crashes`-th quick crash in a row."""
    if crashes < 1:
        raise ValueError(f"crashes counts from 1, got {crashes}")
    return min(ceiling, first * 2 ** min(crashes - 1, 32))


def crashes_after_exit(crashes: int, *, ran_for: float, steady: float = STEADY_SECONDS) -> int:
    """Return the count of quick crashes in a row once a child has exited after `ran_for` seconds.

    A child that ran steadily before it died starts the count again: its next pause is short.
    """
    return 1 if ran_for >= steady else crashes + 1


@dataclass
class Child:
    popen: subprocess.Popen
    started: float
    crashes: int = 0
    restart_at: float | None = None  # set while the child is dead and waiting for its restart


class Supervisor:
    def __init__(
        self, processes: Mapping[str, str], *, env: Mapping[str, str], cwd: Path, out: TextIO = sys.stdout
    ):
        self.processes = dict(processes)
        self.env = dict(env)
        self.cwd = cwd
        self.out = out
        self.width = max(len(name) for name in [*self.processes, "system"])
        self.children: dict[str, Child] = {}
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        self.stop_signal: int | None = None

    def say(self, name: str, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.out.write(f"{stamp} {name.ljust(self.width)} | {text.rstrip()}\n")
        self.out.flush()

    def _request_stop(self, signum: int, frame: object) -> None:
        self.stop_signal = signum

    def _pump(self, name: str, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.lines.put((name, raw.decode(errors="replace")))
        stream.close()

    def _spawn(self, name: str) -> subprocess.Popen:
        popen = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {self.processes[name]}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
        )
        threading.Thread(target=self._pump, args=(name, popen.stdout), daemon=True).start()
        return popen

    def start(self) -> None:
        for name in self.processes:
            popen = self._spawn(name)
            self.children[name] = Child(popen=popen, started=time.monotonic())
            self.say("system", f"{name} started (pid {popen.pid})")

    def _drain(self, wait: float) -> None:
        try:
            name, line = self.lines.get(timeout=wait)
        except queue.Empty:
            return
        self.say(name, line)
        while True:
            try:
                name, line = self.lines.get_nowait()
            except queue.Empty:
                return
            self.say(name, line)

    @staticmethod
    def _signal_group(popen: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # the session is empty: nothing of it is left to signal

    def _tend(self) -> None:
        """Notice children that died and restart those whose pause is over."""
        now = time.monotonic()
        for name, child in self.children.items():
            if child.restart_at is None and child.popen.poll() is not None:
                # The session outlives its leader: kill what the dead child left running.
                self._signal_group(child.popen, signal.SIGKILL)
                child.crashes = crashes_after_exit(child.crashes, ran_for=now - child.started)
                delay = restart_delay(child.crashes)
                child.restart_at = now + delay
                code = child.popen.returncode
                self.say("system", f"{name} exited (code {code}); restarting in {delay:g} s")
            elif child.restart_at is not None and now >= child.restart_at:
                child.popen = self._spawn(name)
                child.started, child.restart_at = now, None
                self.say("system", f"{name} restarted (pid {child.popen.pid})")

    def run(self) -> int:
        """Run until Ctrl-C or SIGTERM, restarting children that exit; return 0."""
        previous = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            while self.stop_signal is None:
                self._drain(0.2)
                self._tend()
            self.say("system", f"{signal.Signals(self.stop_signal).name} received; stopping everything")
            self._stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def _running(self) -> dict[str, subprocess.Popen]:
        return {
            name: child.popen
            for name, child in self.children.items()
            if child.restart_at is None and child.popen.poll() is None
        }

    def _stop(self) -> None:
        running = self._running()
        for popen in running.values():
            self._signal_group(popen, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while any(p.poll() is None for p in running.values()) and time.monotonic() < deadline:
            self._drain(0.1)
        stubborn = [name for name, p in running.items() if p.poll() is None]
        if stubborn:
            self.say(
                "system",
                f"killing {', '.join(stubborn)}: still running {STOP_GRACE_SECONDS:g} s after SIGTERM",
            )
        for popen in running.values():
            self._signal_group(popen, signal.SIGKILL)  # the stubborn, and anything a child left behind
            popen.wait()
        self._drain(0.1)
        for name, popen in running.items():
            self.say("system", f"{name} stopped (exit code {popen.returncode})")
