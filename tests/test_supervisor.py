from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from orbchat.supervisor import crashes_after_exit, parse_procfile, restart_delay
from tests.services import REPO


def test_the_procfile_names_release_web_and_worker():
    processes = parse_procfile((REPO / "Procfile").read_text())
    assert set(processes) == {"release", "web", "worker"}
    assert processes["release"] == "python manage.py migrate --noinput"


def test_comments_and_blank_lines_are_skipped():
    assert parse_procfile("# note\n\nweb: daphne app\n") == {"web": "daphne app"}


def test_a_malformed_line_is_named():
    with pytest.raises(ValueError, match="Procfile line 2 is not 'name: command'"):
        parse_procfile("web: daphne app\njust words\n")


def test_the_pause_before_a_restart_doubles_from_one_second_up_to_thirty():
    assert [restart_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert restart_delay(1000) == 30


def test_a_child_that_ran_steadily_for_a_minute_restarts_after_the_short_pause_again():
    assert crashes_after_exit(5, ran_for=3) == 6
    assert crashes_after_exit(5, ran_for=61) == 1
    assert restart_delay(crashes_after_exit(5, ran_for=61)) == 1


SUPERVISE = """
import sys
from pathlib import Path
from orbchat.supervisor import Supervisor
processes = {"steady": "sleep 600", "crashy": "sh -c 'echo up; exit 3'"}
sys.exit(Supervisor(processes, env={"PATH": "/usr/bin:/bin"}, cwd=Path("."), out=sys.stdout).run())
"""


def test_a_child_that_exits_is_restarted_with_growing_pauses_and_the_others_keep_running():
    supervisor = subprocess.Popen(
        [sys.executable, "-u", "-c", SUPERVISE],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output = []
        deadline = time.monotonic() + 20
        while not any("restarting in 4 s" in line for line in output):
            assert time.monotonic() < deadline, "".join(output)
            output.append(supervisor.stdout.readline())
        text = "".join(output)
        assert "crashy exited (code 3); restarting in 1 s" in text
        assert "crashy exited (code 3); restarting in 2 s" in text
        assert text.count("crashy restarted (pid") == 2
        assert supervisor.poll() is None  # still supervising
        assert "steady" not in text.split("steady started", 1)[1]  # never stopped or restarted
        steady = int(text.split("steady started (pid ", 1)[1].split(")")[0])
        os.kill(steady, 0)  # still the same process
        os.kill(supervisor.pid, signal.SIGTERM)
        assert supervisor.wait(timeout=20) == 0
        rest = supervisor.stdout.read()
        assert "SIGTERM received; stopping everything" in rest and "steady stopped" in rest
        with pytest.raises(ProcessLookupError):
            os.kill(steady, 0)
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait()
