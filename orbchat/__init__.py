"""OrbChat: a self-hosted roleplay chat with memory."""

from orbchat.celery import app as celery_app

__all__ = ["celery_app"]
