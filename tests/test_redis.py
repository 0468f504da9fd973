from __future__ import annotations

from orbchat import redis


def test_key_names_are_those_a_running_redis_already_holds():
    assert [
        redis.stop_key(7),
        redis.presence_key(7),
        redis.memory_dirty_key(7),
        redis.memory_lock_key(7),
        redis.memory_cancel_key(7),
        redis.login_key("account", "ab12"),
        redis.login_key("address", "10.1.0.1"),
    ] == [
        "orbchat:stop:7",
        "orbchat:present:7",
        "orbchat:memory-dirty:7",
        "orbchat:memory-lock:7",
        "orbchat:memory-cancel:7",
        "orbchat:login:account:ab12",
        "orbchat:login:address:10.1.0.1",
    ]


def test_the_blocking_client_is_shared_per_timeout_and_the_probe_is_its_own():
    assert redis.sync_client() is redis.sync_client()
    assert redis.sync_client(timeout=2) is not redis.sync_client()
    probe = redis.probe_client(timeout=1)
    try:
        assert probe is not redis.sync_client(timeout=1)
    finally:
        probe.close()
