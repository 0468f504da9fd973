"""The embedded Redis as `make run` starts it keeps queued work across a crash."""

from __future__ import annotations

import os
import signal
import time

import redis

from orbchat.run import embedded_redis_command
from tests.services import Process, wait_until


def start(data, log_dir) -> tuple[Process, redis.Redis]:
    sock = data / "redis.sock"
    process = Process("redis", embedded_redis_command(data, sock), log_dir=log_dir)
    client = redis.Redis.from_url(f"unix://{sock}")
    wait_until(client.ping, timeout=20, what="redis", process=process.popen, log=process.log)
    return process, client


def test_queued_work_survives_a_crash_of_the_embedded_redis(tmp_path):
    data, logs = tmp_path / "data", tmp_path / "logs"
    data.mkdir()
    logs.mkdir()
    process, client = start(data, logs)
    try:
        client.rpush("memory", "a queued catch-up")  # Celery's queue for memory work is a list
        client.set("orbchat:memory-dirty:7", "1")
        time.sleep(1.5)  # the append-only file is flushed once a second
        os.killpg(process.popen.pid, signal.SIGKILL)  # a crash: no chance to save on the way out
        process.popen.wait()
    finally:
        process.stop()

    process, client = start(data, logs)
    try:
        assert client.lrange("memory", 0, -1) == [b"a queued catch-up"]
        assert client.get("orbchat:memory-dirty:7") == b"1"
        assert (data / "redis.aof").exists()  # in the data folder, beside the database
    finally:
        process.stop()
