"""Who is in a room right now: the open room sockets, kept in Redis with a short lifetime.

Each open socket has an entry (user id and socket id) in a sorted set per room, scored by the
time it lapses: PRESENCE_TTL seconds after the socket last renewed it. An open socket renews
its entry every third of that lifetime, so a web process that dies without closing its sockets
leaves no one online for longer than PRESENCE_TTL; the next renewal of any other socket in the
room drops the lapsed entries and tells the room. Every web node shares the set, so the list is
right behind a load balancer. Each change is sent to the room group as the ids of the people
online (what every member may see anyway).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from django.conf import settings

from orbchat import redis
from rooms import events

log = logging.getLogger(__name__)


def ttl() -> float:
    """Seconds an entry lives without renewal (PRESENCE_TTL, at least one)."""
    return max(1.0, float(settings.PRESENCE_TTL))


class Presence:
    """One open socket's entry in its room's list."""

    def __init__(self, room_id: int, user_id: int, socket_id: str) -> None:
        self.room_id = room_id
        self.entry = f"{user_id}:{socket_id}"

    async def arrive(self) -> None:
        await self._renew()
        await _announce(self.room_id)

    async def renew(self) -> None:
        """Push this socket's lapse time on; tell the room when that changed who is online."""
        added, lapsed = await self._renew()
        if added or lapsed:  # back after the entry lapsed (Redis restarted), or others lapsed
            await _announce(self.room_id)

    async def depart(self) -> None:
        await redis.client().zrem(redis.presence_key(self.room_id), self.entry)
        await _announce(self.room_id)

    async def keep_alive(self, owner: asyncio.Task) -> None:
        """Renew the entry every third of its lifetime while `owner` (the socket's task) runs.

        Tied to the task, not left to `disconnect`: a socket whose task ends without one (a crash,
        a cancel) stops renewing and lapses like the socket of a process that died.
        """
        while not owner.done():
            await asyncio.sleep(ttl() / 3)
            if owner.done():
                return
            try:
                await self.renew()
            except Exception:  # noqa: BLE001 - Redis away for a moment: the next renewal retries
                log.warning("could not renew presence in room %s", self.room_id, exc_info=True)

    async def _renew(self) -> tuple[int, int]:
        now = time.time()
        async with redis.client().pipeline(transaction=True) as pipe:
            pipe.zadd(redis.presence_key(self.room_id), {self.entry: now + ttl()})
            pipe.zremrangebyscore(redis.presence_key(self.room_id), "-inf", now)
            pipe.expire(redis.presence_key(self.room_id), math.ceil(ttl()))
            added, lapsed, _ = await pipe.execute()
        return added, lapsed


async def users(room_id: int) -> list[int]:
    entries = await redis.client().zrangebyscore(redis.presence_key(room_id), time.time(), "+inf")
    return sorted({int(entry.split(b":", 1)[0]) for entry in entries})


async def _announce(room_id: int) -> None:
    await events.ato_room(room_id, {"type": "room.online", "users": await users(room_id)})
