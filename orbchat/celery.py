"""The Celery application: background work (summaries, embeddings, backfills) runs here."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready

from orbchat import env

env.apply_offline_defaults()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbchat.settings")

app = Celery("orbchat")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _warm_up(**kwargs) -> None:
    """Import litellm (slow: docs/benchmarks.md) when the worker starts, not inside the first task,
    under its lock."""
    from orbchat.connections import gateway  # its models need the app registry, ready only once the worker is

    gateway.count_tokens("warm up")
