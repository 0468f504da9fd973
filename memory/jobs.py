"""Memory's background work, enqueued by task name: services never import `memory.tasks`.

The names are those the tasks register under (`memory.tasks` declares them with these), and all
of memory's tasks run on the `memory` queue.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)

QUEUE = "memory"
CATCH_UP = "memory.tasks.catch_up"
BACKFILL = "memory.tasks.backfill"
FORGET_VECTORS = "memory.tasks.forget_vectors"
REINDEX = "memory.tasks.reindex"


def send(name: str, *args: object) -> None:
    """Enqueue the task `name` now; a broker hiccup is logged, never raised."""
    try:
        current_app.send_task(name, args=args, queue=QUEUE)
    except Exception:  # noqa: BLE001 - a broker hiccup must not break the reply; the next one retries
        log.exception("could not enqueue memory work")


def enqueue_catch_up(room_id: int) -> None:
    """Ask the worker to catch the room's memory up, once the current transaction commits."""
    transaction.on_commit(lambda: send(CATCH_UP, room_id))


def enqueue_forget_vectors(
    host_id: int, memory_ids: list[str], scene_ids: list[str], fact_ids: list[str] | None = None
) -> None:
    """Ask the worker to delete these vectors from the host's index, once the transaction commits."""
    transaction.on_commit(lambda: send(FORGET_VECTORS, host_id, memory_ids, scene_ids, list(fact_ids or ())))


def enqueue_reindex(generation_id: int) -> None:
    """Ask the worker to fill a building generation, once the current transaction commits."""
    transaction.on_commit(lambda: send(REINDEX, generation_id))
