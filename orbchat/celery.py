"""The Celery application: background work (summaries, embeddings, backfills) runs here."""

from __future__ import annotations

import logging
import os
import socket
import threading

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown

from orbchat import env

env.apply_offline_defaults()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbchat.settings")

app = Celery("orbchat")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# How much lower than the web process the worker runs (os.nice: 0 same, 19 lowest). On a small
# machine the worker's embedding batches then take only the CPU the web process leaves.
WORKER_NICE = env.get_int("WORKER_NICE", 10)


@worker_init.connect
def _lower_priority(**kwargs) -> None:
    """Run the worker (and the pool processes it forks, which inherit it) below the web process."""
    if WORKER_NICE > 0:
        os.nice(WORKER_NICE)


# A worker says it is alive by a key in the broker's Redis that it renews every HEARTBEAT_EVERY
# seconds and that lapses HEARTBEAT_TTL seconds after the last renewal. /healthz reads the key
# rather than pinging: a worker that runs its tasks in its own process (the `solo` pool, the
# default) answers no ping until the task in hand is done, and a backfill takes minutes.
HEARTBEAT_PREFIX = "orbchat:worker-alive:"
HEARTBEAT_EVERY = 2.0
HEARTBEAT_TTL = 10

log = logging.getLogger(__name__)
_beating = threading.Event()  # set: the heartbeat is to stop


def broker_redis(conn):
    """The Redis client of a broker connection (the broker is always Redis here)."""
    return conn.default_channel.client


def _heartbeat(key: str) -> None:
    while not _beating.is_set():
        try:
            with app.connection_for_write() as conn:
                client = broker_redis(conn)
                while not _beating.is_set():
                    client.set(key, "1", ex=HEARTBEAT_TTL)
                    _beating.wait(HEARTBEAT_EVERY)
        except Exception as exc:  # noqa: BLE001 - the broker away for a moment: try again
            log.warning("worker heartbeat: %s", exc)
            _beating.wait(HEARTBEAT_EVERY)


def _heartbeat_key() -> str:
    return f"{HEARTBEAT_PREFIX}{socket.gethostname()}:{os.getpid()}"


_beats: list[threading.Thread] = []  # the running heartbeat thread


@worker_ready.connect
def _start_heartbeat(**kwargs) -> None:
    _beating.clear()
    beat = threading.Thread(target=_heartbeat, args=(_heartbeat_key(),), name="worker-heartbeat", daemon=True)
    beat.start()
    _beats.append(beat)


@worker_shutdown.connect
def _stop_heartbeat(**kwargs) -> None:
    """Withdraw the heartbeat at once, once its thread has stopped renewing it: a stopped worker
    is not counted until its key lapses."""
    _beating.set()
    while _beats:
        _beats.pop().join(timeout=2)
    try:
        with app.connection_for_write() as conn:
            broker_redis(conn).delete(_heartbeat_key())
    except Exception as exc:  # noqa: BLE001 - the key lapses on its own
        log.warning("worker heartbeat: %s", exc)


@worker_ready.connect
def _warm_up(**kwargs) -> None:
    """Import litellm (slow: docs/benchmarks.md) when the worker starts, not inside the first task,
    under its lock; but only when someone has a Utility model. Memory written by the built-in
    summariser and embedder never needs it, and it holds about 260 MB with its tokenizer."""
    # Their models need the app registry, ready only once the worker is.
    from orbchat.connections import gateway
    from orbchat.connections.selectors import utility_in_use

    try:
        wanted = utility_in_use()
    except Exception as exc:  # noqa: BLE001 - no database yet: the first task imports it if it must
        log.warning("worker warm-up: %s", exc)
        return
    if wanted:
        gateway.count_tokens("warm up")
