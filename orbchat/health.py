"""Health checks of the parts OrbChat runs on: database, Redis, Chroma and a Celery worker."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection

OK = "ok"


def check_db() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()  # the check runs in a worker thread: do not leak its connection
    return OK


def check_redis() -> str:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return OK


def check_chroma() -> str:
    from memory import vectorstore

    vectorstore.heartbeat()
    return OK


def check_worker() -> str:
    from orbchat.celery import app

    timeout = settings.HEALTH_WORKER_TIMEOUT
    with app.connection_for_write() as conn:
        # Fail fast when the broker is down instead of Celery's default endless retry.
        conn.ensure_connection(max_retries=1, timeout=timeout)
        replies = app.control.ping(timeout=timeout, connection=conn)
    if not replies:
        raise RuntimeError(f"no Celery worker answered a ping within {timeout:g} s")
    return OK


CHECKS: dict[str, Callable[[], str]] = {
    "db": check_db,
    "redis": check_redis,
    "chroma": check_chroma,
    "worker": check_worker,
}


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return f"error: {text}"


def run_checks() -> dict[str, str]:
    """Run every check at once; return each part's "ok" or its error text."""
    with ThreadPoolExecutor(max_workers=len(CHECKS)) as pool:
        futures = {name: pool.submit(check) for name, check in CHECKS.items()}
        results = {}
        for name, future in futures.items():
            try:
                results[name] = future.result(timeout=10)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a reported status
                results[name] = _describe(exc)
    return results
