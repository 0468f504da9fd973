from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from orbchat import env
from tests import services
from tests.fakes.llm import FakeLLM


@pytest.fixture(scope="session")
def service_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("services")


@pytest.fixture(scope="session", autouse=True)
def real_services(service_dir):
    """Start Redis and Chroma for the whole run and point the settings at them."""
    started = []
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        import redis

        redis.Redis.from_url(redis_url).flushdb()  # CI gives this run a database of its own
    else:
        process, redis_url = services.start_redis(service_dir)
        started.append(process)
    chroma_url = os.environ.get("CHROMA_URL")
    if not chroma_url:
        process, chroma_url = services.start_chroma(service_dir)
        started.append(process)

    settings.REDIS_URL = redis_url
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"] = redis_url
    settings.CELERY_BROKER_URL = env.celery_broker_url(redis_url)
    settings.CHROMA_URL = chroma_url
    from orbchat.celery import app

    app.conf.broker_url = settings.CELERY_BROKER_URL
    yield {"redis": redis_url, "chroma": chroma_url}
    for process in reversed(started):
        process.stop()


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """Give every test its own channel layer object.

    The layer keeps asyncio locks that bind to the loop of their first use; a test whose loop
    ended mid-receive would leave one locked for every later test.
    """
    yield
    from channels.layers import channel_layers

    channel_layers.backends.clear()


# The fake provider listens on loopback: in the tests it is a local model server the operator
# allowed (OUTBOUND_ALLOW), as a shared server's operator would allow their KoboldCpp. The tests of
# the outbound policy itself clear it.
FAKE_PROVIDER_ALLOW = "127.0.0.1"


@pytest.fixture(scope="session", autouse=True)
def embedder_loaded():
    """Load the built-in embedding model before the first test.

    Importing `orbchat.asgi` (socket tests do) makes the test process a web process: its embeds
    then wait at most `WARM_WAIT_SECONDS` for a model still warming up, as a reply does after a
    restart. A clean checkout exports the model first, which takes longer than that on a busy
    machine; the tests of that wait start processes of their own (`tests/test_embedder.py`).
    """
    from orbchat.connections import embedder

    embedder.load()


@pytest.fixture(scope="session", autouse=True)
def fake_provider_allowed():
    settings.OUTBOUND_ALLOW = FAKE_PROVIDER_ALLOW


@pytest.fixture(scope="session", autouse=True)
def quick_passwords():
    """Hash test passwords quickly (a real hash costs half a second, and tests make hundreds)."""
    from django.contrib.auth import hashers

    settings.PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()


@pytest.fixture(scope="session", autouse=True)
def static_files():
    """Collect static files as a deployment does; the manifest storage needs them."""
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.fixture(scope="session")
def child_env(real_services, django_db_setup, django_db_blocker) -> dict[str, str]:
    """Environment for child processes (worker, web) so they share the test database."""
    from django.db import connection

    with django_db_blocker.unblock():
        db = connection.settings_dict
        if db["ENGINE"].endswith("sqlite3"):
            database_url = f"sqlite:///{db['NAME']}"
        else:
            auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
            database_url = f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return {
        "DATABASE_URL": database_url,
        "REDIS_URL": real_services["redis"],
        "CHROMA_URL": real_services["chroma"],
        "ORBCHAT_DATA_DIR": str(settings.DATA_DIR),
        "SECRET_KEY": settings.SECRET_KEY,
        "MEMORY_RETRY_BACKOFF": "0.2,0.2,0.2",
        "MEMORY_LOCK_TTL": "15",
        "OUTBOUND_ALLOW": FAKE_PROVIDER_ALLOW,
    }


@pytest.fixture(scope="module")
def celery_worker(service_dir, child_env):
    """A real Celery worker process on the test broker and database, for one test module.

    Module scope: a worker left running would pick up the memory work other modules' tests
    enqueue and drive themselves, and race them.
    """
    from orbchat.celery import app

    app.control.purge()  # work queued by earlier tests (with no worker) is not this test's
    process = services.start_worker(service_dir, child_env)
    yield process
    process.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    """Let the worker finish what a test set going before that test's fixtures are torn down.

    Otherwise the teardown's database flush can meet a memory cycle still writing (PostgreSQL
    then deadlocks) and the fake provider can stop under a call still in flight.
    """
    if "celery_worker" in getattr(item, "fixturenames", ()):
        services.wait_worker_idle()


@pytest.fixture(scope="session")
def live_site(service_dir, child_env):
    """A real daphne server (HTTP + websockets) on the test database; its base URL."""
    process, url = services.start_web(service_dir, child_env)
    yield url
    process.stop()


@pytest.fixture
def fake_llm():
    with FakeLLM() as server:
        yield server
