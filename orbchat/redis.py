"""Redis for the web process: the clients, and the names of the keys the rooms keep there.

The channel layer and Celery reach Redis through their own settings; everything else that the
web process keeps in Redis (the Stop flags, who is online) uses this module's clients.
"""

from __future__ import annotations

import asyncio
import weakref

import redis.asyncio as aioredis
from django.conf import settings

# Per event loop: a loop that is gone (a finished test, say) takes its client with it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = weakref.WeakKeyDictionary()


def client() -> aioredis.Redis:
    """Return this event loop's Redis client (connections are pooled, not made per call)."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None:
        found = _clients[loop] = aioredis.Redis.from_url(settings.REDIS_URL)
    return found


def stop_key(room_id: int) -> str:
    """The room's Stop flag: when its running reply was asked to stop."""
    return f"orbchat:stop:{room_id}"


def presence_key(room_id: int) -> str:
    """The room's open sockets, scored by the time each lapses."""
    return f"orbchat:present:{room_id}"
