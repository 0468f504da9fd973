"""Redis for OrbChat's own processes: the clients, and the names of every key kept there.

The channel layer and Celery reach Redis through their own settings; everything else that
OrbChat keeps in Redis (the Stop flags, who is online, memory's room locks, sign-in throttling)
uses this module's clients and key names.
"""

from __future__ import annotations

import asyncio
import weakref

import redis
import redis.asyncio as aioredis
from django.conf import settings

# Per event loop: a loop that is gone (a finished test, say) takes its client with it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = weakref.WeakKeyDictionary()
# Per URL and timeout, shared by the threads of the process (a client pools its connections).
_sync_clients: dict[tuple[str, float | None], redis.Redis] = {}


def client() -> aioredis.Redis:
    """Return this event loop's Redis client (connections are pooled, not made per call)."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None:
        found = _clients[loop] = aioredis.Redis.from_url(settings.REDIS_URL)
    return found


def sync_client(*, timeout: float | None = None) -> redis.Redis:
    """Return the process's blocking Redis client; `timeout` bounds connecting and each reply."""
    url = settings.REDIS_URL
    found = _sync_clients.get((url, timeout))
    if found is None:
        found = _sync_clients[(url, timeout)] = redis.Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=timeout
        )
    return found


def probe_client(*, timeout: float) -> redis.Redis:
    """Return a client of its own, outside the shared pool, for one check; the caller closes it."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=timeout, socket_timeout=timeout)


def stop_key(room_id: int) -> str:
    """The room's Stop flag: when its running reply was asked to stop."""
    return f"orbchat:stop:{room_id}"


def presence_key(room_id: int) -> str:
    """The room's open sockets, scored by the time each lapses."""
    return f"orbchat:present:{room_id}"


def memory_dirty_key(room_id: int) -> str:
    """Set when the room's memory has work waiting for the run that holds the room."""
    return f"orbchat:memory-dirty:{room_id}"


def memory_lock_key(room_id: int) -> str:
    """The lock of the one run that writes the room's memory."""
    return f"orbchat:memory-lock:{room_id}"


def memory_cancel_key(room_id: int) -> str:
    """Set when the room's backfill was asked to stop."""
    return f"orbchat:memory-cancel:{room_id}"


def memory_cycle_state_key(room_id: int) -> str:
    """The room's running memory cycle as its host's panel last showed it (JSON)."""
    return f"orbchat:memory-cycle-state:{room_id}"


def memory_cycle_cancel_key(room_id: int) -> str:
    """Set when the host cancelled the room's running memory cycle."""
    return f"orbchat:memory-cycle-cancel:{room_id}"


LOGIN_PREFIX = "orbchat:login"


def login_key(scope: str, who: str) -> str:
    """The stem of a sign-in count's keys (`:failures`, `:locked`) for an account or an address."""
    return f"{LOGIN_PREFIX}:{scope}:{who}"
