from __future__ import annotations

import os
import signal
import socket
import time
from contextlib import contextmanager

import pytest
from django.db import connection

from orbchat import health
from orbchat.celery import HEARTBEAT_PREFIX, HEARTBEAT_TTL, app, broker_redis
from tests import services
from tests.services import free_port

pytestmark = pytest.mark.django_db(transaction=True)


ALL_OK = {"db": "ok", "redis": "ok", "chroma": "ok", "worker": "ok", "web": "ok"}


def get_health(client):
    response = client.get("/healthz")
    return response.status_code, response.json()


def test_all_parts_ok(client, celery_worker):
    status, body = get_health(client)
    assert (status, body) == (200, ALL_OK)


def test_a_process_still_warming_up_is_not_ready_yet(client, celery_worker):
    health.warming("litellm")
    try:
        status, body = get_health(client)
        assert status == 503 and body["web"] == "warming up: litellm"
        assert body["db"] == body["worker"] == "ok"
    finally:
        health.warmed("litellm")
    assert get_health(client) == (200, ALL_OK)


def test_healthz_needs_no_login_even_before_setup(client, celery_worker):
    status, _ = get_health(client)
    assert status == 200


def test_redis_down(client, settings, celery_worker, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/nothing-here.sock"
    status, body = get_health(client)
    assert status == 503
    assert body["redis"].startswith("error:") and "nothing-here.sock" in body["redis"]
    assert body["db"] == body["chroma"] == body["worker"] == "ok"


def test_chroma_down(client, settings, celery_worker):
    settings.CHROMA_URL = f"http://127.0.0.1:{free_port()}"
    status, body = get_health(client)
    assert status == 503
    assert body["chroma"].startswith("error:")
    assert body["db"] == body["redis"] == body["worker"] == "ok"


def test_no_worker_answers(client, monkeypatch, real_services):
    # A broker database no worker listens on: no heartbeat there.
    url = app.conf.broker_url
    unanswered = url + "?virtual_host=9" if url.startswith("redis+socket") else url.rsplit("/", 1)[0] + "/9"
    monkeypatch.setattr(app.conf, "broker_url", unanswered)
    status, body = get_health(client)
    assert status == 503
    assert body["worker"] == "error: no Celery worker has reported in the last 10 s"
    # A worker busy with a long task answers no ping, but its heartbeat keeps it healthy.
    with app.connection_for_write() as conn:
        beat = broker_redis(conn)
        beat.set(f"{HEARTBEAT_PREFIX}busy:1", "1", ex=HEARTBEAT_TTL)
        try:
            assert get_health(client)[1]["worker"] == "ok"
        finally:
            beat.delete(f"{HEARTBEAT_PREFIX}busy:1")


def test_a_worker_renews_its_heartbeat_and_withdraws_it_when_it_stops(service_dir, child_env):
    worker = services.start_worker(service_dir, child_env, queues="heartbeat-only")
    key = f"{HEARTBEAT_PREFIX}{socket.gethostname()}:{worker.popen.pid}"
    with app.connection_for_write() as conn:
        beat = broker_redis(conn)
        try:
            assert 0 < beat.ttl(key) <= HEARTBEAT_TTL, "the running worker has no heartbeat"
        finally:
            worker.stop()
        assert not beat.exists(key)


def test_database_down(client, celery_worker):
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-dir/orbchat.sqlite3"
    else:
        connection.close_pool()  # the pool's open connections would hide the move
        connection.settings_dict["PORT"] = str(free_port())
    try:
        status, body = get_health(client)
    finally:
        connection.close()
        if connection.vendor != "sqlite":
            connection.close_pool()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert status == 503
    assert body["db"].startswith("error:")
    assert body["redis"] == body["chroma"] == body["worker"] == "ok"


@contextmanager
def frozen(process: services.Process):
    """Stop a server's processes without closing its socket: connections open, nothing answers."""
    os.killpg(process.popen.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(process.popen.pid, signal.SIGCONT)
        process.stop()


def timed_health(client) -> tuple[float, int, dict]:
    start = time.monotonic()
    status, body = get_health(client)
    return time.monotonic() - start, status, body


def test_a_frozen_chroma_is_named_and_the_answer_still_comes_within_3_s(
    client, settings, celery_worker, tmp_path
):
    process, url = services.start_chroma(tmp_path)
    with frozen(process):
        settings.CHROMA_URL = url
        took, status, body = timed_health(client)
    assert took < 3, f"/healthz took {took:.1f} s"
    assert status == 503
    assert body["chroma"] == "timed out after 2 s"
    assert body["db"] == body["redis"] == body["worker"] == "ok"


def test_a_frozen_redis_is_named_and_the_answer_still_comes_within_3_s(
    client, settings, celery_worker, tmp_path
):
    process, url = services.start_redis(tmp_path)
    with frozen(process):
        settings.REDIS_URL = url
        took, status, body = timed_health(client)
    assert took < 3, f"/healthz took {took:.1f} s"
    assert status == 503
    assert body["redis"] == "timed out after 2 s"
    assert body["db"] == body["chroma"] == body["worker"] == "ok"
