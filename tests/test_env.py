from __future__ import annotations

import os

import pytest

from orbchat import env


def test_secret_key_is_generated_once_into_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ORBCHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SECRET_KEY", raising=False)
    first = env.secret_key()
    assert len(first) > 40
    assert env.secret_key() == first
    assert (tmp_path / "data" / "secret_key").stat().st_mode & 0o777 == 0o600


def test_a_given_secret_key_wins(monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "from-the-environment")
    assert env.secret_key() == "from-the-environment"


def test_embedded_redis_unless_redis_url(tmp_path, monkeypatch):
    monkeypatch.setenv("ORBCHAT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert env.redis_url() == f"unix://{tmp_path}/redis.sock"
    assert env.celery_broker_url(env.redis_url()) == f"redis+socket://{tmp_path}/redis.sock"
    monkeypatch.setenv("REDIS_URL", "redis://cache:6379/2")
    assert env.celery_broker_url(env.redis_url()) == "redis://cache:6379/2"


def test_a_malformed_number_names_the_variable(monkeypatch):
    monkeypatch.setenv("CHROMA_PORT", "eighty")
    with pytest.raises(ValueError, match="CHROMA_PORT must be a whole number"):
        env.chroma_port()


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="PostgreSQL only (CI's second pass)"
)
def test_postgresql_connections_are_pooled_not_opened_per_use(transactional_db):
    """Every request, turn and task closes its connection when done; on PostgreSQL that hands it
    back to the pool instead of ending a server process that the next use starts again."""
    from django.db import connection

    connection.ensure_connection()  # the pool exists once a connection has been asked for
    connection.close()
    opened = connection.pool.get_stats().get("connections_num", 0)
    backends = set()
    for _ in range(6):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backends.add(cursor.fetchone()[0])
        connection.close()
    # Handed back and taken again: the pool's idle connections in turn (earlier tests may have
    # grown it past one), never a new server process per use.
    stats = connection.pool.get_stats()
    assert stats.get("connections_num", 0) == opened
    assert len(backends) <= stats["pool_size"]
