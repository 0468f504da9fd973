from __future__ import annotations

import pytest
from django.db import connection

from orbchat.celery import app
from tests.services import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def get_health(client):
    response = client.get("/healthz")
    return response.status_code, response.json()


def test_all_parts_ok(client, celery_worker):
    status, body = get_health(client)
    assert (status, body) == (200, {"db": "ok", "redis": "ok", "chroma": "ok", "worker": "ok"})


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
    # A broker database no worker listens on: the ping goes out and nobody answers.
    url = app.conf.broker_url
    unanswered = url + "?virtual_host=9" if url.startswith("redis+socket") else url.rsplit("/", 1)[0] + "/9"
    monkeypatch.setattr(app.conf, "broker_url", unanswered)
    status, body = get_health(client)
    assert status == 503
    assert body["worker"] == "error: no Celery worker answered a ping within 2 s"


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
