"""Health checks of the parts OrbChat runs on: database, Redis, Chroma, a Celery worker, and this
web process's own warm-up.

The checks run at once, each in a thread of its own, and the answer waits for them at most
HEALTH_CHECK_TIMEOUT seconds: a part that hangs (a frozen server accepts a connection and then
says nothing) is reported as timed out instead of holding the answer. Each check also bounds
its own network waits (a second past that limit, so the limit is what reports a frozen part),
and a thread left behind by a frozen part ends soon after.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable

from django.conf import settings
from django.db import connection

from orbchat import redis
from orbchat.celery import HEARTBEAT_PREFIX, HEARTBEAT_TTL, app, broker_redis
from orbchat.connections import embedder

OK = "ok"

# What this process is still warming up (a web process at its start), by name.
_warming: set[str] = set()
_warming_lock = threading.Lock()


def warming(name: str) -> None:
    with _warming_lock:
        _warming.add(name)


def warmed(name: str) -> None:
    with _warming_lock:
        _warming.discard(name)


def _own_limit() -> float:
    return settings.HEALTH_CHECK_TIMEOUT + 1.0


def check_db() -> str:
    pool = getattr(connection, "pool", None) if connection.vendor == "postgresql" else None
    if pool is not None:
        # Borrow straight from the pool with a wait shorter than the answer's limit, so a
        # database that is down reports the pool's error rather than "timed out"; the
        # connection goes back to the pool, not to a thread that is about to end.
        conn = pool.getconn(timeout=max(0.5, settings.HEALTH_CHECK_TIMEOUT - 0.5))
        try:
            conn.execute("SELECT 1").fetchone()
        finally:
            pool.putconn(conn)
        return OK
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()  # the check runs in a thread of its own: do not leak its connection
    return OK


def check_redis() -> str:
    client = redis.probe_client(timeout=_own_limit())
    try:
        client.ping()
    finally:
        client.close()
    return OK


def check_chroma() -> str:
    # The server's heartbeat endpoint, asked directly: the shared vector-store client waits
    # without a limit, and every request to a frozen server would keep one of its threads.
    url = f"{settings.CHROMA_URL.rstrip('/')}/api/v2/heartbeat"
    with urllib.request.urlopen(url, timeout=_own_limit()) as response:
        response.read()
    return OK


def check_worker() -> str:
    """A worker is up when its heartbeat key is in the broker's Redis (`orbchat.celery`)."""
    timeout = settings.HEALTH_WORKER_TIMEOUT
    with app.connection_for_write() as conn:
        # Fail fast when the broker is down instead of Celery's default endless retry.
        conn.ensure_connection(max_retries=1, timeout=timeout)
        found = next(broker_redis(conn).scan_iter(match=f"{HEARTBEAT_PREFIX}*", count=100), None)
    if found is None:
        raise RuntimeError(f"no Celery worker has reported in the last {HEARTBEAT_TTL} s")
    return OK


def check_web() -> str:
    """This process is ready once its warm-up is done: litellm imported and, in a web process,
    the memory model loaded. Until then /healthz answers 503 with what it waits for, so that
    `make run` says "ready" (and a load balancer sends people) only once a reply starts at once."""
    with _warming_lock:
        waits = sorted(_warming)
    model = embedder.serving_state()
    if model:
        waits.append(model)
    return f"warming up: {'; '.join(waits)}" if waits else OK


CHECKS: dict[str, Callable[[], str]] = {
    "db": check_db,
    "redis": check_redis,
    "chroma": check_chroma,
    "worker": check_worker,
    "web": check_web,
}


def describe(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return f"error: {text}"


def run_checks(
    checks: dict[str, Callable[[], str]] | None = None, *, timeout: float | None = None
) -> dict[str, str]:
    """Run every check at once; return each part's "ok", its error text, or "timed out"."""
    checks = CHECKS if checks is None else checks
    timeout = settings.HEALTH_CHECK_TIMEOUT if timeout is None else timeout
    results: dict[str, str] = {}

    def run(name: str, check: Callable[[], str]) -> None:
        try:
            results[name] = check()
        except Exception as exc:  # noqa: BLE001 - every failure becomes a reported status
            results[name] = describe(exc)

    # Daemon threads: one stuck on a frozen part must not hold the process up when it exits.
    threads = {
        name: threading.Thread(target=run, args=(name, check), name=f"healthz-{name}", daemon=True)
        for name, check in checks.items()
    }
    for thread in threads.values():
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    return {name: results.get(name, f"timed out after {timeout:g} s") for name in checks}
