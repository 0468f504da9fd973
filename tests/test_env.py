from __future__ import annotations

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
