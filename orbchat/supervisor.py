"""A Procfile runner: start named shell commands together, stop them together.

Each child runs in its own session so a stop reaches its whole process tree. Signal handlers
only set a flag (printing from a handler can re-enter a half-written stdout); the loop does
the rest. The first child to exit without being asked brings the others down and is named.
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
from pathlib import Path
from typing import TextIO

STOP_GRACE_SECONDS = 10.0


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


class Supervisor:
    def __init__(
        self, processes: Mapping[str, str], *, env: Mapping[str, str], cwd: Path, out: TextIO = sys.stdout
    ):
        self.processes = dict(processes)
        self.env = dict(env)
        self.cwd = cwd
        self.out = out
        self.width = max(len(name) for name in self.processes)
        self.children: dict[str, subprocess.Popen] = {}
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        self.stop_signal: int | None = None
        self.culprit: tuple[str, int] | None = None

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

    def start(self) -> None:
        self.width = max(self.width, len("system"))
        for name, command in self.processes.items():
            child = subprocess.Popen(
                ["/bin/sh", "-c", f"exec {command}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
            self.children[name] = child
            threading.Thread(target=self._pump, args=(name, child.stdout), daemon=True).start()
            self.say("system", f"{name} started (pid {child.pid})")

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

    def _signal_all(self, sig: int) -> None:
        for child in self.children.values():
            if child.poll() is None:
                try:
                    os.killpg(child.pid, sig)
                except ProcessLookupError:
                    pass

    def run(self) -> int:
        """Run until Ctrl-C, SIGTERM or a child's exit; return 0 for a requested stop."""
        previous = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            while self.stop_signal is None and self.culprit is None:
                self._drain(0.2)
                for name, child in self.children.items():
                    if child.poll() is not None:
                        self.culprit = (name, child.returncode)
                        break
            if self.culprit:
                self.say(
                    "system", f"{self.culprit[0]} exited with code {self.culprit[1]}; stopping the others"
                )
            else:
                self.say("system", f"{signal.Signals(self.stop_signal).name} received; stopping everything")
            self._stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 1 if self.culprit else 0

    def _stop(self) -> None:
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while any(c.poll() is None for c in self.children.values()) and time.monotonic() < deadline:
            self._drain(0.1)
        stubborn = [name for name, c in self.children.items() if c.poll() is None]
        if stubborn:
            self.say(
                "system",
                f"killing {', '.join(stubborn)}: still running {STOP_GRACE_SECONDS:g} s after SIGTERM",
            )
            self._signal_all(signal.SIGKILL)
            for child in self.children.values():
                child.wait()
        self._drain(0.1)
        for name, child in self.children.items():
            self.say("system", f"{name} stopped (exit code {child.returncode})")
