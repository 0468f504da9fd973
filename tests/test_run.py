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


def test_run_serves_stops_on_ctrl_c_restarts_and_reports_a_crashed_child(tmp_path):
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
        }
        deadline = time.monotonic() + 10
        while f"OrbChat is ready: {url}" not in log_path.read_text():
            assert time.monotonic() < deadline, "the URL was never announced"
            time.sleep(0.2)
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
        worker = next(
            p for p in descendants(launcher.pid) if "worker" in p.cmdline() and "celery" in p.name()
        )
        children = descendants(launcher.pid)
        worker.kill()  # a crash, not a request to stop
        assert launcher.wait(timeout=30) != 0
        assert all_gone(children), "the other children were left running after the crash"
        output = log_path.read_text()
        assert "OrbChat stopped because worker exited on its own (exit code -9)" in output
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
