"""Stop: a flag in Redis that any web node can set and the room's running reply checks."""

from __future__ import annotations

import time

from orbchat import redis

STOP_POLL = 0.25  # seconds between checks of the Stop flag
STOP_TTL = 600


async def request_stop(room_id: int) -> None:
    """Ask the room's running reply to stop; a reply started after this moment ignores it."""
    await redis.client().set(redis.stop_key(room_id), str(time.time()), ex=STOP_TTL)


async def requested(room_id: int, since: float) -> bool:
    """True when Stop was asked for in the room at `since` or later."""
    value = await redis.client().get(redis.stop_key(room_id))
    return value is not None and float(value) >= since
