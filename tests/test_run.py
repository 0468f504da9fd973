"""`make run`'s launcher, end to end: real Redis, Chroma, daphne and Celery, supervised."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest

from tests.services import REPO, free_port

pytestmark = pytest.mark.slow


def health(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_healthy(url: str, launcher: subprocess.Popen, log_path, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        assert launcher.poll() is None, f"launcher exited early:\n{log_path.read_text()[-4000:]}"
        try:
            status, body = health(url)
            if status == 200:
                return body
            last = body
        except OSError as exc:
            last = exc
        time.sleep(1)
    raise AssertionError(f"not healthy after {timeout} s (last: {last}):\n{log_path.read_text()[-4000:]}")


def launch(data_dir, port: int, chroma_port: int, log_path) -> subprocess.Popen:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDIS_URL", "CHROMA_URL", "DATABASE_URL", "SECRET_KEY")
    }
    env.update(ORBCHAT_DATA_DIR=str(data_dir), PORT=str(port), CHROMA_PORT=str(chroma_port))
    return subprocess.Popen(
        [sys.executable, "-m", "orbchat.run"],
        cwd=REPO,
        env=env,
        stdout=open(log_path, "ab"),  # noqa: SIM115 - the child owns it
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def all_gone(processes: list[psutil.Process], timeout: float = 20) -> bool:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return not alive


def wait_for_line(log_path, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in log_path.read_text():
        assert time.monotonic() < deadline, f"never said {text!r}:\n{log_path.read_text()[-4000:]}"
        time.sleep(0.2)


def child(launcher: subprocess.Popen, name: str, *words: str) -> psutil.Process:
    return next(
        p
        for p in descendants(launcher.pid)
        if name in p.name() and all(word in p.cmdline() for word in words)
    )


def workers(launcher: subprocess.Popen) -> list[psutil.Process]:
    found = []
    for p in descendants(launcher.pid):
        try:
            if "celery" in p.name() and "worker" in p.cmdline():
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


def answers(url: str) -> int:
    with urllib.request.urlopen(f"{url}/login/", timeout=10) as response:
        return response.status


def test_run_serves_and_stops_on_ctrl_c_and_keeps_its_secret_across_a_restart(tmp_path):
    data_dir, log_path = tmp_path / "data", tmp_path / "run.log"
    port, chroma_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"

    launcher = launch(data_dir, port, chroma_port, log_path)
    try:
        assert wait_healthy(url, launcher, log_path) == {
            "db": "ok",
            "redis": "ok",
            "chroma": "ok",
            "worker": "ok",
            "web": "ok",
        }
        wait_for_line(log_path, f"OrbChat is ready: {url}", timeout=10)
        secret = (data_dir / "secret_key").read_text()
        children = descendants(launcher.pid)
        os.killpg(launcher.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        assert launcher.wait(timeout=30) == 0
        assert all_gone(children), "a child outlived Ctrl-C"
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)

    launcher = launch(data_dir, port, chroma_port, log_path)
    try:
        wait_healthy(url, launcher, log_path)
        assert (data_dir / "secret_key").read_text() == secret
    finally:
        os.killpg(launcher.pid, signal.SIGINT)
        launcher.wait(timeout=30)


def test_a_crashed_chroma_worker_or_redis_is_restarted_while_the_site_keeps_serving(tmp_path):
    data_dir, log_path = tmp_path / "data", tmp_path / "run.log"
    port, chroma_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"

    launcher = launch(data_dir, port, chroma_port, log_path)
    try:
        wait_healthy(url, launcher, log_path)

        child(launcher, "chroma").kill()  # a crash, not a request to stop
        wait_for_line(log_path, "chroma exited (code -9); restarting in 1 s")
        assert answers(url) == 200
        wait_healthy(url, launcher, log_path, timeout=90)

        worker = child(launcher, "celery", "worker")
        pool = worker.children(recursive=True)
        worker.kill()
        wait_for_line(log_path, "worker exited (code -9); restarting in 1 s")
        assert answers(url) == 200
        assert all_gone(pool, timeout=10), "the dead worker's pool was left running"
        # The dead worker's heartbeat lapses on its own; the new one is a new process.
        deadline = time.monotonic() + 60
        while not [p for p in workers(launcher) if p.pid != worker.pid] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert [p for p in workers(launcher) if p.pid != worker.pid], "the worker was not restarted"
        wait_healthy(url, launcher, log_path, timeout=120)

        import redis

        client = redis.Redis.from_url(f"unix://{data_dir / 'redis.sock'}")
        client.set("orbchat:kept", "across a crash")
        time.sleep(1.5)
        child(launcher, "redis-server").kill()
        wait_for_line(log_path, "redis exited (code -9); restarting in 1 s")
        wait_healthy(url, launcher, log_path, timeout=90)
        assert client.get("orbchat:kept") == b"across a crash"

        assert launcher.poll() is None
    finally:
        os.killpg(launcher.pid, signal.SIGINT)
        assert launcher.wait(timeout=30) == 0
