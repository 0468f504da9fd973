"""The Celery application: background work (summaries, embeddings, backfills) runs here."""

from __future__ import annotations

import os

from celery import Celery

from orbchat import env

env.apply_offline_defaults()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbchat.settings")

app = Celery("orbchat")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
