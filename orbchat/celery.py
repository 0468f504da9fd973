"""The Celery application: background work (summaries, embeddings, backfills) runs here."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init, worker_ready

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


@worker_ready.connect
def _warm_up(**kwargs) -> None:
    """Import litellm (slow: docs/benchmarks.md) when the worker starts, not inside the first task,
    under its lock."""
    from orbchat.connections import gateway  # its models need the app registry, ready only once the worker is

    gateway.count_tokens("warm up")
