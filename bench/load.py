"""A real backfill running in a real worker while a benchmark measures: `--while-backfilling`.

The worker is the Procfile's `worker` command (one process, niced, as `make run` starts it)
on this run's database, Redis and Chroma. A room of 10,000 messages is backfilled with the
built-in extractive summariser and the built-in embedder; when one backfill finishes, the next
starts on another room (`ROOMS` are filled before the measurement starts, so filling them does
not load the measuring process). `running()` says whether a backfill is running at this moment:
the benchmarks keep only the samples taken while one was.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import sys
import threading
from pathlib import Path

from django.conf import settings
from django.db import connections

from bench import kit
from memory import jobs, selectors, tasks
from memory.models import RoomMemory
from orbchat import env
from orbchat.celery import app
from orbchat.supervisor import parse_procfile
from rooms import services

MESSAGES = 10_000
ROOMS = 4
WORDS = ["lamp", "ferry", "ledger", "brass key", "fog bell", "harbour", "storm", "tide", "chart", "cellar"]


def backfill_text(rng: random.Random, seq: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40)))
    return f"Maren speaks of the {words} (#{seq})."


def start_worker(children: kit.Children):
    """The Procfile's `worker` (one process) on this run's database, Redis and Chroma,
    once it answers a ping."""
    app.conf.broker_url = env.celery_broker_url(settings.REDIS_URL)  # this run's Redis
    command = parse_procfile((settings.BASE_DIR / "Procfile").read_text())["worker"]
    # ${NAME:-default} as the shell `make run` starts it with expands it.
    command = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: os.environ.get(m[1]) or m[2], command)
    args = shlex.split(command)
    args[0] = str(Path(sys.executable).parent / args[0])  # the virtualenv's, as `make run` finds it
    worker_env = {
        **os.environ,
        "DATABASE_URL": kit.database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CHROMA_URL": settings.CHROMA_URL,
        "SECRET_KEY": settings.SECRET_KEY,
        "ORBCHAT_DATA_DIR": str(settings.DATA_DIR),
    }
    worker = children.spawn("worker", args, worker_env)
    kit.wait_until(lambda: app.control.ping(timeout=1)[0], "the Celery worker", worker, 120)
    return worker


class Backfilling:
    """Keep a 10,000-message backfill running in a real worker while the block runs."""

    def __init__(
        self, children: kit.Children, user, character, *, messages: int = MESSAGES, rooms: int = ROOMS
    ) -> None:
        self.children, self.user, self.character, self.messages = children, user, character, messages
        self.rooms = rooms
        self.backfills = 0  # how many were started
        self._running = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._room = None
        self._waiting: list = []

    def __enter__(self) -> Backfilling:
        app.conf.broker_url = env.celery_broker_url(settings.REDIS_URL)
        with app.connection_for_write() as connection:  # work queued by what ran before is not this load
            for queue in (jobs.QUEUE, "default"):
                connection.default_channel.queue_purge(queue)
        worker = self._worker = start_worker(self.children)
        self._waiting = [self._make_room(number) for number in range(self.rooms)]
        self._start()
        self._thread = threading.Thread(target=self._keep_going, name="backfilling", daemon=True)
        self._thread.start()
        kit.wait_until(self._started, "the first backfill", worker, 300)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._room is not None:
            tasks.backfill_cancel(self._room.pk)
        # The worker goes before the run deletes its rooms, so nothing writes into them meanwhile.
        self._worker.terminate()
        self._worker.wait(timeout=60)

    def running(self) -> bool:
        return self._running

    def _started(self) -> None:
        if not self._running:
            raise kit.BenchError("not running yet")

    def _make_room(self, number: int):
        rng = random.Random(number)
        room = services.room_create_from_character(host=self.user, character=self.character)
        kit.bulk_history(
            room, range(1, self.messages), text_for=lambda seq: backfill_text(rng, seq), tokens=40
        )
        kit.settle()
        return room

    def _start(self) -> None:
        self._room = self._waiting.pop(0)
        tasks.backfill_start(self._room.pk)
        self.backfills += 1

    def _keep_going(self) -> None:
        try:
            while not self._stop.wait(0.25):
                phase = selectors.backfill_progress(self._room.pk)["phase"]
                self._running = phase == RoomMemory.Backfill.RUNNING
                if phase == RoomMemory.Backfill.DONE and self._waiting:
                    self._start()
        finally:
            connections.close_all()
